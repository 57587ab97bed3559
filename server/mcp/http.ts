/**
 * The MCP server over Streamable HTTP at `/mcp` of `sluice serve`, behind
 * the server's bearer token: the SDK's transport and session handling
 * (`Mcp-Session-Id`), one SDK server per MCP session, each MCP session one
 * sluice session (`mcp-<time>-<random>` as for `sluice mcp`, or the
 * `session` query parameter of the initialize request). Sessions are
 * bounded in number: past the bound the one idle longest is closed, so
 * clients that never send DELETE cannot grow the server without limit; but
 * never one with a call running, whose result its client is waiting for
 * (those are bounded by the server's `maxActiveCalls`): the bound is applied
 * again as each call ends.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { CallHandle } from '../../engine/call/call-types.js';
import type { Engine } from '../../engine/engine.js';
import { assertSessionId } from '../../engine/sessions/session-id.js';
import { connectionSessionId } from '../mcp-names.js';
import { createMcpServer } from './server.js';

/** Options of {@link McpHttpEndpoint}. */
export interface McpHttpOptions {
  /** Largest request body, in bytes (the server's `maxBodyBytes`). */
  maxBodyBytes: number;
  /** MCP sessions open at once; a new one past this closes the one idle longest with no call running. @default 64 */
  maxSessions?: number;
  /** Called as each call starts, with the sluice session it is recorded in. */
  started?(handle: CallHandle, tool: string, session: string): void;
  /** Throws to refuse a call before it starts. */
  admit?(): void;
}

interface Session {
  transport: StreamableHTTPServerTransport;
  server: Server;
  lastUsed: number;
  /** Calls running in it: while any is, it is never evicted. */
  running: number;
}

function jsonRpcError(res: ServerResponse, status: number, code: number, message: string): void {
  const body = JSON.stringify({ jsonrpc: '2.0', id: null, error: { code, message } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** The `/mcp` endpoint of one HTTP server: its MCP sessions on one engine. */
export class McpHttpEndpoint {
  private readonly engine: Engine;
  private readonly maxBodyBytes: number;
  private readonly maxSessions: number;
  private readonly started: McpHttpOptions['started'];
  private readonly admit: McpHttpOptions['admit'];
  private readonly sessions = new Map<string, Session>();
  private closing = false;

  constructor(engine: Engine, options: McpHttpOptions) {
    this.engine = engine;
    this.maxBodyBytes = options.maxBodyBytes;
    this.maxSessions = options.maxSessions ?? 64;
    this.started = options.started;
    this.admit = options.admit;
  }

  /** MCP sessions open now. */
  get size(): number {
    return this.sessions.size;
  }

  /** Serves one authenticated request to `/mcp`. */
  async handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const header = req.headers['mcp-session-id'];
    if (typeof header === 'string') {
      const s = this.sessions.get(header);
      // The transport's own answer for a session it does not know, so clients start a new one.
      if (!s) return jsonRpcError(res, 404, -32001, `no MCP session ${JSON.stringify(header.slice(0, 100))}`);
      s.lastUsed = Date.now();
      await s.transport.handleRequest(req, res);
      return;
    }
    if (req.method !== 'POST') {
      return jsonRpcError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
    }
    // The Mcp-Session-Id is the transport's own (unguessable); the sluice session is named as sluice mcp names it.
    const id = randomUUID();
    const session = url.searchParams.get('session') ?? connectionSessionId();
    assertSessionId(session);
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      maxRequestBodySize: this.maxBodyBytes,
      onsessioninitialized: () => {
        this.sessions.set(id, entry);
        this.evict();
      },
    });
    const started = this.started;
    const server = createMcpServer(this.engine, {
      session,
      started: (handle: CallHandle, tool: string) => {
        entry.running++;
        void handle.result.finally(() => {
          entry.running--;
          entry.lastUsed = Date.now();
          // Sessions kept past the bound while they had calls running may go now.
          if (entry.running === 0) this.evict();
        });
        started?.(handle, tool, session);
      },
      ...(this.admit ? { admit: this.admit } : {}),
    });
    const entry: Session = { transport, server, lastUsed: Date.now(), running: 0 };
    transport.onclose = () => {
      if (this.sessions.get(id) === entry) this.sessions.delete(id);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res);
    // Anything but an initialize request leaves no session behind.
    if (!this.sessions.has(id) || this.closing) await server.close();
  }

  /** Closes the sessions idle longest, of those with no call running, while there are more than the bound. */
  private evict(): void {
    while (this.sessions.size > this.maxSessions && !this.closing) {
      let oldest: [string, Session] | undefined;
      for (const e of this.sessions) {
        if (e[1].running === 0 && (!oldest || e[1].lastUsed < oldest[1].lastUsed)) oldest = e;
      }
      if (!oldest) return;
      this.sessions.delete(oldest[0]);
      void oldest[1].server.close();
    }
  }

  /** Closes every session: their running calls are cancelled (and recorded) by the abort of their requests. */
  async close(): Promise<void> {
    this.closing = true;
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.allSettled(all.map((s) => s.server.close()));
  }
}
