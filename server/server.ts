/**
 * `sluice serve`'s HTTP server (Node's http module): bearer-token auth on
 * every request, the routes of routes.ts, live events as server-sent events,
 * and a clean shutdown that loses nothing: stop accepting, cancel the calls
 * it started, wait until their results are final and recorded, let every
 * event stream deliver its terminal frame, then close.
 *
 * The server does not own the engine: whoever opened it closes it after
 * {@link SluiceServer.close} (the CLI does).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Engine } from '../engine/engine.js';
import {
  BadMethodError,
  BadOptionError,
  ClosedError,
  NotFoundError,
  ResourceLimitError,
} from '../engine/protocol/errors.js';
import { firstIssue } from '../engine/protocol/issues.js';
import { MAX_TIMER_MS } from '../engine/protocol/limits.js';
import { OPTIONAL_DEPENDENCIES, requireOptional } from '../engine/protocol/optional-dependencies.js';
import { z } from '../engine/protocol/zod.js';
import { PROTOCOL_VERSION } from '../engine/wire/schemas.js';
import { bearerMatches } from './auth.js';
import { HttpError, sendError } from './http.js';
import type { McpHttpEndpoint } from './mcp/http.js';
import { MCP_PATH } from './mcp-names.js';
import { type RouteContext, route } from './routes.js';
import { StoreSizeCache } from './store-size.js';
import { CallTracker } from './tracker.js';
import { isWebPath, serveWeb } from './web.js';

/** Port of `sluice serve` when none is given. */
export const DEFAULT_PORT = 7433;
/** Host of `sluice serve` when none is given: loopback only. */
export const DEFAULT_HOST = '127.0.0.1';

/** Options of {@link startServer}. */
export interface ServerOptions {
  /** The bearer token every request must carry (see `loadOrCreateToken`). */
  token: string;
  /** Address to listen on. @default '127.0.0.1' */
  host?: string;
  /** Port to listen on; 0 picks a free one (read {@link SluiceServer.port}). @default 7433 */
  port?: number;
  /** Largest request body in bytes; larger is 413 ERESOURCELIMIT. @default 1 MiB */
  maxBodyBytes?: number;
  /** SSE frames queued per connection before that client is marked lagged. @default 256 */
  subscriberQueue?: number;
  /** Events kept per call for Last-Event-ID resume. @default 512 */
  bufferEvents?: number;
  /** Bytes of events kept per call for resume (so at most `maxActiveCalls` × this for running calls). @default 256 KiB */
  bufferBytes?: number;
  /** Finished calls whose results and events are kept. @default 1000 */
  retainCalls?: number;
  /** Bytes of finished calls' results and events kept. @default 64 MiB */
  retainBytes?: number;
  /** Milliseconds a finished call is kept. @default 15 minutes */
  retainMs?: number;
  /** Calls running at once through this server; more is 429 ERESOURCELIMIT. @default 1024 */
  maxActiveCalls?: number;
  /**
   * MCP sessions open at once on `/mcp`; past it the one idle longest with no call running is
   * closed (one with calls running never is). @default 64
   */
  maxMcpSessions?: number;
  /** Milliseconds between keep-alive comments on an idle event stream. @default 15000 */
  heartbeatMs?: number;
  /** Milliseconds shutdown waits for event streams to take their terminal frames before cutting them. @default 5000 */
  shutdownGraceMs?: number;
  /**
   * Milliseconds a connection has to send a request's headers; then it is
   * answered 408 and closed, so half-sent requests cannot hold descriptors.
   * @default 10000
   */
  headersTimeoutMs?: number;
  /**
   * Connections that have not yet sent a request with the token. Beyond this
   * many, the oldest of them is closed, so idle unauthenticated sockets can
   * never take every descriptor from the token holder (whose new connection
   * is the youngest, and stops counting with its first request).
   * @default 64
   */
  maxUnauthenticatedConnections?: number;
  /** Connections open at once; more are closed as they arrive. @default 1024 */
  maxConnections?: number;
}

const MiB = 1024 * 1024;
/** How long a request may take to arrive whole (headers and body); the headers timeout is at most this. */
const REQUEST_TIMEOUT_MS = 60_000;
const positive = z.number().int().positive();

const optionsSchema = z.strictObject({
  token: z.string().min(16),
  host: z.string().min(1).default(DEFAULT_HOST),
  port: z.number().int().min(0).max(65535).default(DEFAULT_PORT),
  maxBodyBytes: positive.default(MiB),
  subscriberQueue: positive.default(256),
  bufferEvents: positive.default(512),
  bufferBytes: positive.default(256 * 1024),
  retainCalls: z.number().int().nonnegative().default(1000),
  retainBytes: z
    .number()
    .int()
    .nonnegative()
    .default(64 * MiB),
  retainMs: z
    .number()
    .int()
    .nonnegative()
    .default(15 * 60 * 1000),
  maxActiveCalls: positive.default(1024),
  maxMcpSessions: positive.default(64),
  heartbeatMs: positive.max(MAX_TIMER_MS).default(15_000),
  shutdownGraceMs: z.number().int().nonnegative().max(MAX_TIMER_MS).default(5000),
  headersTimeoutMs: positive.max(REQUEST_TIMEOUT_MS).default(10_000),
  maxUnauthenticatedConnections: positive.default(64),
  maxConnections: positive.default(1024),
});

type Resolved = z.output<typeof optionsSchema>;

/** A running HTTP server on an engine. */
export class SluiceServer {
  /** The address it listens on. */
  readonly host: string;
  /** The port it listens on (the real one when 0 was asked for). */
  readonly port: number;
  private readonly server: Server;
  private readonly options: Resolved;
  private readonly tracker: CallTracker;
  private readonly ctx: RouteContext;
  private readonly stopping = new AbortController();
  private readonly inflight = new Set<Promise<void>>();
  /** Connections without an authenticated request yet, oldest first. */
  private readonly unauthenticated = new Set<Socket>();
  private closed: Promise<void> | undefined;
  /** The `/mcp` endpoint, loaded with the MCP SDK on its first request. */
  private mcp: Promise<McpHttpEndpoint> | undefined;

  private constructor(server: Server, engine: Engine, options: Resolved) {
    this.server = server;
    this.options = options;
    const address = server.address() as AddressInfo;
    this.host = options.host;
    this.port = address.port;
    this.tracker = new CallTracker({
      subscriberQueue: options.subscriberQueue,
      bufferEvents: options.bufferEvents,
      bufferBytes: options.bufferBytes,
      retainCalls: options.retainCalls,
      retainBytes: options.retainBytes,
      retainMs: options.retainMs,
    });
    this.ctx = {
      engine,
      tracker: this.tracker,
      shutdown: this.stopping.signal,
      maxBodyBytes: options.maxBodyBytes,
      maxActiveCalls: options.maxActiveCalls,
      heartbeatMs: options.heartbeatMs,
      streams: new Set(),
      storeSize: new StoreSizeCache(engine.store),
      reports: {},
    };
    server.maxConnections = options.maxConnections;
    server.on('connection', (socket: Socket) => {
      this.unauthenticated.add(socket);
      socket.once('close', () => this.unauthenticated.delete(socket));
      if (this.unauthenticated.size > options.maxUnauthenticatedConnections) {
        const oldest = this.unauthenticated.values().next().value as Socket;
        this.unauthenticated.delete(oldest);
        oldest.destroy();
      }
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const p = this.handle(req, res).catch(() => {
        res.destroy();
      });
      this.inflight.add(p);
      void p.finally(() => this.inflight.delete(p));
    });
  }

  /** Base URL, e.g. `http://127.0.0.1:7433` (IPv6 hosts in brackets). */
  get url(): string {
    return `http://${this.host.includes(':') ? `[${this.host}]` : this.host}:${this.port}`;
  }

  /** Validates the options and starts listening. EBADOPTION for bad options, EDISK-like errors for a busy port. */
  static async listen(engine: Engine, options: ServerOptions): Promise<SluiceServer> {
    const r = optionsSchema.safeParse(options);
    if (!r.success) {
      const i = firstIssue(r.error, options);
      const got = i.key === 'token' ? 'got (hidden)' : i.got;
      throw new BadOptionError(`server option ${i.key || '(options)'}: ${i.message} (${got})`, { option: i.key });
    }
    const server = createServer({
      requestTimeout: REQUEST_TIMEOUT_MS,
      headersTimeout: r.data.headersTimeoutMs,
      // Node checks these timeouts only once per interval: a short one makes them hold.
      connectionsCheckingInterval: Math.min(1000, r.data.headersTimeoutMs),
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(r.data.port, r.data.host, () => {
        server.off('error', reject);
        resolve();
      });
    }).catch((err: NodeJS.ErrnoException) => {
      throw new BadOptionError(`cannot listen on ${r.data.host}:${r.data.port}: ${err.message}`, {
        errno: err.code ?? null,
      });
    });
    return new SluiceServer(server, engine, r.data);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const pathname = new URL(req.url ?? '/', 'http://sluice.invalid').pathname;
    // The web view's files hold no data: the page asks for the token, then sends it with every API request.
    if (isWebPath(req.method ?? 'GET', pathname)) return serveWeb(req, res, pathname);
    if (!bearerMatches(req.headers.authorization, this.options.token)) {
      // Nothing else: no body, no hint of which routes exist.
      res.sendDate = false;
      res.writeHead(401, { 'www-authenticate': 'Bearer', 'content-length': 0, connection: 'close' });
      res.end();
      return;
    }
    // The token holder's connection: never closed to make room.
    this.unauthenticated.delete(req.socket);
    res.setHeader('sluice-protocol', String(PROTOCOL_VERSION));
    try {
      if (this.stopping.signal.aborted) {
        throw new HttpError(new ClosedError('the server is shutting down'), 503, { connection: 'close' });
      }
      const url = new URL(req.url ?? '/', 'http://sluice.invalid');
      if (url.pathname === MCP_PATH) return await this.serveMcp(req, res, url);
      const method = req.method ?? 'GET';
      const found = route(method, url.pathname);
      if (!found) throw new NotFoundError(`no endpoint ${method} ${url.pathname} (see docs/http.md)`);
      if ('allow' in found) {
        const allow = found.allow.join(', ');
        throw new HttpError(
          new BadMethodError(`${method} is not allowed on ${url.pathname} (allowed: ${allow})`, { method, allow }),
          405,
          { allow },
        );
      }
      await found.handler(this.ctx, req, res, found.params, url);
    } catch (err) {
      sendError(res, err);
    }
  }

  /** `/mcp`: the MCP server over Streamable HTTP (server/mcp/http.ts); EMISSINGDEP without the SDK. */
  private async serveMcp(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    if (!this.mcp) {
      requireOptional(OPTIONAL_DEPENDENCIES.mcp);
      this.mcp = import('./mcp/http.js').then(
        (m) =>
          new m.McpHttpEndpoint(this.ctx.engine, {
            maxBodyBytes: this.options.maxBodyBytes,
            maxSessions: this.options.maxMcpSessions,
            started: (handle, tool, session) => this.tracker.track(handle, tool, session),
            // The same bound as POST /v1/calls: MCP calls count among the server's running calls.
            admit: () => {
              if (this.tracker.active >= this.options.maxActiveCalls) {
                throw new ResourceLimitError(
                  `${this.tracker.active} calls are running, the most this server runs at once`,
                  { limit: this.options.maxActiveCalls },
                );
              }
            },
          }),
      );
    }
    await (await this.mcp).handle(req, res, url);
  }

  /**
   * Shuts down cleanly: stops accepting connections and requests (503
   * ECLOSED), cancels the calls this server started and waits for their
   * terminal results (final and recorded), lets every event stream send its
   * terminal frame (streams that cannot take it within `shutdownGraceMs` are
   * cut), then closes every connection. Idempotent.
   */
  close(): Promise<void> {
    this.closed ??= this.shutdown();
    return this.closed;
  }

  private async shutdown(): Promise<void> {
    this.stopping.abort();
    const stopped = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    // MCP sessions first: closing them aborts their calls, which then end like the others.
    await (await this.mcp?.catch(() => undefined))?.close();
    const running = this.tracker.running();
    for (const c of running) c.handle.cancel('the server is shutting down');
    await Promise.all(running.map((c) => c.done));
    // Every call has ended: the summaries stream has nothing more to say.
    this.tracker.endSummaries();
    const pending = Promise.allSettled([...this.ctx.streams, ...this.inflight]);
    const grace = new AbortController();
    await Promise.race([
      pending,
      sleep(this.options.shutdownGraceMs, undefined, { signal: grace.signal }).catch(() => {}),
    ]);
    grace.abort();
    this.server.closeAllConnections();
    await stopped;
  }
}

/** Starts an HTTP server on `engine` (see docs/http.md). */
export function startServer(engine: Engine, options: ServerOptions): Promise<SluiceServer> {
  return SluiceServer.listen(engine, options);
}
