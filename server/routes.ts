/**
 * The endpoints of the HTTP API (docs/http.md), each a handler of one
 * authenticated request. Bodies and queries are validated with the schemas of
 * engine/wire/schemas.ts; errors become `{ error: { code, message } }`
 * through {@link sendError} in the server.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Engine } from '../engine/engine.js';
import { packageVersion } from '../engine/package-root.js';
import { BadArgumentsError, ClosedError, NotFoundError, ResourceLimitError } from '../engine/protocol/errors.js';
import type { z } from '../engine/protocol/zod.js';
import {
  type callAcceptedSchema,
  type callPendingSchema,
  callRequestSchema,
  cancelRequestSchema,
  type cancelResponseSchema,
  type infoResponseSchema,
  PROTOCOL_VERSION,
  readQuerySchema,
  searchQuerySchema,
  type toolsResponseSchema,
} from '../engine/wire/schemas.js';
import { HttpError, parseWith, readJsonBody, sendJson, sendJsonArrayStream } from './http.js';
import { clientGone, onlyParams, parseCount, parseFlag, queryObject, requestSignal } from './query.js';
import { streamCallEvents } from './sse.js';
import type { StoreSizeCache } from './store-size.js';
import type { CallTracker, TrackedCall } from './tracker.js';
import {
  type LastReports,
  listCalls,
  revert,
  runGc,
  runVerify,
  serverEvents,
  stats,
  storeInfo,
} from './view-routes.js';

/** The type a response schema describes. */
type Body<S extends z.ZodType> = z.output<S>;

/** What handlers share: the engine, the calls, the limits, and the server's shutdown signal. */
export interface RouteContext {
  engine: Engine;
  tracker: CallTracker;
  /** Aborted when the server starts shutting down: reads in progress are cancelled. */
  shutdown: AbortSignal;
  maxBodyBytes: number;
  maxActiveCalls: number;
  heartbeatMs: number;
  /** Open event streams; shutdown waits for them to deliver their terminal frames. */
  streams: Set<Promise<void>>;
  /** The store's blob counts for `GET /v1/store`. */
  storeSize: StoreSizeCache;
  /** The last collection and verification this server ran. */
  reports: LastReports;
}

/** One endpoint's handler. */
export type Handler = (
  ctx: RouteContext,
  req: IncomingMessage,
  res: ServerResponse,
  params: string[],
  url: URL,
) => Promise<void>;

interface Route {
  method: 'GET' | 'POST';
  pattern: RegExp;
  handler: Handler;
}

/** Ids in paths: call ids (UUIDs) and session ids; exact checks happen downstream. */
const ID = '([A-Za-z0-9._-]{1,256})';

/** Longest `wait` of `GET /v1/calls/:id`, in seconds. */
export const MAX_WAIT_SECONDS = 60;

function lookup(ctx: RouteContext, id: string): TrackedCall {
  const call = ctx.tracker.get(id);
  if (!call) {
    throw new NotFoundError(`no call ${JSON.stringify(id)} on this server (unknown, or its result is no longer kept)`, {
      callId: id,
    });
  }
  return call;
}

const info: Handler = async (_ctx, _req, res, _p, url) => {
  onlyParams(url, [], 'GET /v1/info');
  const body: Body<typeof infoResponseSchema> = {
    name: 'sluice',
    version: packageVersion(),
    protocolVersion: PROTOCOL_VERSION,
  };
  sendJson(res, 200, body);
};

let openApiText: string | undefined;
const openApi: Handler = async (_ctx, _req, res, _p, url) => {
  onlyParams(url, [], 'GET /v1/openapi.json');
  // Generated from the wire schemas once, on first request: the same bytes as docs/schema/openapi.json.
  openApiText ??= (await import('../engine/wire/openapi.js')).renderOpenApi();
  res.writeHead(200, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(openApiText),
    'cache-control': 'no-store',
  });
  res.end(openApiText);
};

const tools: Handler = async (ctx, _req, res, _p, url) => {
  onlyParams(url, [], 'GET /v1/tools');
  const body: Body<typeof toolsResponseSchema> = {
    tools: ctx.engine.tools().map((t) => ({
      name: t.name,
      description: t.description,
      source: t.source,
      output: t.output,
      selfPaginating: t.selfPaginating,
      isolation: t.isolation,
      ...(t.preview !== undefined ? { preview: t.preview } : {}),
      argsSchema: t.argsSchema,
    })),
  };
  sendJson(res, 200, body);
};

const startCall: Handler = async (ctx, req, res, _p, url) => {
  onlyParams(url, [], 'POST /v1/calls');
  const body = parseWith(callRequestSchema, await readJsonBody(req, ctx.maxBodyBytes), 'POST /v1/calls body');
  // The body may have arrived after shutdown began, when the calls to cancel were already counted.
  if (ctx.shutdown.aborted) throw new HttpError(new ClosedError('the server is shutting down'), 503);
  if (ctx.tracker.active >= ctx.maxActiveCalls) {
    throw new HttpError(
      new ResourceLimitError(`${ctx.tracker.active} calls are running, the most this server runs at once`, {
        limit: ctx.maxActiveCalls,
      }),
      429,
    );
  }
  const handle = ctx.engine.call(body.tool, body.args, {
    ...(body.session !== undefined ? { session: body.session } : {}),
    ...(body.timeoutMs !== undefined ? { timeoutMs: body.timeoutMs } : {}),
    ...(body.preview !== undefined ? { preview: body.preview } : {}),
    ...(body.sandbox !== undefined ? { sandbox: body.sandbox } : {}),
  });
  ctx.tracker.track(handle, body.tool, body.session);
  const accepted: Body<typeof callAcceptedSchema> = { callId: handle.callId };
  sendJson(res, 202, accepted, { location: `/v1/calls/${handle.callId}` });
};

const getCall: Handler = async (ctx, _req, res, [id], url) => {
  const q = onlyParams(url, ['wait'], 'GET /v1/calls/:id');
  const call = lookup(ctx, id as string);
  const wait = parseCount('wait', q.wait, MAX_WAIT_SECONDS) ?? 0;
  if (call.resultJson === undefined && wait > 0) {
    const stop = new AbortController();
    // Not cut short by shutdown: shutdown cancels the call, so the terminal result is on its way.
    const timer = sleep(wait * 1000, undefined, { signal: AbortSignal.any([clientGone(res), stop.signal]) });
    await Promise.race([call.done, timer.catch(() => {})]);
    // The result came first: the timer must not outlive the request.
    stop.abort();
  }
  if (call.resultJson !== undefined) {
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(call.resultJson),
      'cache-control': 'no-store',
    });
    res.end(call.resultJson);
    return;
  }
  const pending: Body<typeof callPendingSchema> = {
    callId: call.callId,
    tool: call.tool,
    ...(call.session !== undefined ? { session: call.session } : {}),
    status: 'running',
    startedAt: call.startedAt,
  };
  sendJson(res, 202, pending);
};

const events: Handler = async (ctx, req, res, [id], url) => {
  const q = onlyParams(url, ['lastEventId', 'progress'], 'GET /v1/calls/:id/events');
  const progress = parseFlag('progress', q.progress);
  const call = lookup(ctx, id as string);
  const header = req.headers['last-event-id'];
  const lastEventId = parseCount('Last-Event-ID', typeof header === 'string' ? header.trim() : q.lastEventId) ?? 0;
  const terminal = call.terminal;
  if (terminal && lastEventId >= terminal.id) {
    // The client has the terminal event: 204 tells an EventSource to stop reconnecting.
    res.writeHead(204, { 'cache-control': 'no-store' });
    res.end();
    return;
  }
  if (lastEventId > call.lastId) {
    throw new HttpError(
      new BadArgumentsError(
        `Last-Event-ID ${lastEventId} is past the last event (${call.lastId}) of call ${call.callId}`,
      ),
    );
  }
  const stream = streamCallEvents(call, req, res, { lastEventId, heartbeatMs: ctx.heartbeatMs, progress });
  ctx.streams.add(stream);
  try {
    await stream;
  } finally {
    ctx.streams.delete(stream);
  }
};

const cancel: Handler = async (ctx, req, res, [id], url) => {
  onlyParams(url, [], 'POST /v1/calls/:id/cancel');
  const call = lookup(ctx, id as string);
  const body = parseWith(cancelRequestSchema, await readJsonBody(req, ctx.maxBodyBytes, {}), 'cancel body');
  if (call.status !== undefined) {
    const done: Body<typeof cancelResponseSchema> = { callId: call.callId, status: call.status };
    sendJson(res, 200, done);
    return;
  }
  call.handle.cancel(body.reason ?? 'cancelled over HTTP');
  const accepted: Body<typeof cancelResponseSchema> = { callId: call.callId, status: 'cancelling' };
  sendJson(res, 202, accepted);
};

/**
 * True when the client prefers the page's bytes (`application/octet-stream`)
 * to JSON in its Accept header, by quality value: bytes must be acceptable
 * (q > 0) and rank above JSON (named, or through a wildcard); on a tie JSON,
 * the default, wins.
 */
export function wantsBytes(accept: string | undefined): boolean {
  const q = new Map<string, number>();
  for (const part of (accept ?? '').split(',')) {
    const [type, ...params] = part.split(';').map((x) => x.trim().toLowerCase());
    if (!type) continue;
    const qp = params.find((p) => p.startsWith('q='));
    const value = qp === undefined ? 1 : Number(qp.slice(2));
    q.set(type, Number.isFinite(value) ? value : 0);
  }
  const of = (type: string) => q.get(type) ?? q.get(`${type.split('/')[0]}/*`) ?? q.get('*/*');
  const bytes = q.get('application/octet-stream') ?? 0;
  return bytes > 0 && bytes > (of('application/json') ?? 0);
}

const read: Handler = async (ctx, req, res, _p, url) => {
  const q = parseWith(readQuerySchema, queryObject(url), 'GET /v1/read query');
  const offset = parseCount('offset', q.offset);
  const limit = parseCount('limit', q.limit);
  const byteOffset = parseCount('byteOffset', q.byteOffset);
  const options = {
    ...(offset !== undefined ? { offset } : {}),
    ...(limit !== undefined ? { limit } : {}),
    ...(byteOffset !== undefined ? { byteOffset } : {}),
    signal: requestSignal(ctx, res),
  };
  if (!wantsBytes(req.headers.accept)) {
    sendJson(res, 200, await ctx.engine.read(q.filePath, options));
    return;
  }
  // The exact stored bytes; what JSON would say besides the content travels in headers.
  const page = await ctx.engine.readBytes(q.filePath, options);
  res.writeHead(200, {
    'content-type': 'application/octet-stream',
    'content-length': page.bytes.length,
    'cache-control': 'no-store',
    'sluice-offset': page.offset,
    'sluice-lines': page.lines,
    'sluice-total-lines': page.totalLines,
    'sluice-next-offset': page.nextOffset ?? 'null',
    'sluice-next-byte-offset': page.nextByteOffset ?? 'null',
    'sluice-lossy': String(page.lossy),
  });
  res.end(page.bytes);
};

const search: Handler = async (ctx, _req, res, _p, url) => {
  const q = parseWith(searchQuerySchema, queryObject(url), 'GET /v1/search query');
  const context = parseCount('context', q.context);
  const limit = parseCount('limit', q.limit);
  const offset = parseCount('offset', q.offset);
  const result = await ctx.engine.search(q.filePath, q.pattern, {
    ...(q.regex === 'true' ? { regex: true } : {}),
    ...(q.ignoreCase === 'true' ? { ignoreCase: true } : {}),
    ...(context !== undefined ? { context } : {}),
    ...(limit !== undefined ? { limit } : {}),
    ...(offset !== undefined ? { offset } : {}),
    signal: requestSignal(ctx, res),
  });
  sendJson(res, 200, result);
};

const sessions: Handler = async (ctx, _req, res, _p, url) => {
  onlyParams(url, [], 'GET /v1/sessions');
  sendJson(res, 200, { sessions: await ctx.engine.sessions() });
};

const replay: Handler = async (ctx, _req, res, [id], url) => {
  onlyParams(url, [], 'GET /v1/sessions/:id/replay');
  // Streamed call by call, each read back from the log when the client can take it (see openReplay).
  const { calls, close, ...summary } = await ctx.engine.openReplay(id as string);
  try {
    await sendJsonArrayStream(res, 200, summary, 'calls', calls());
  } finally {
    // Also when the client left before the first call was pulled (the iteration never started).
    await close();
  }
};

const metrics: Handler = async (ctx, _req, res, _p, url) => {
  onlyParams(url, [], 'GET /v1/metrics');
  const { renderMetrics } = await import('./metrics.js');
  const { contentType, text } = await renderMetrics(ctx.engine);
  res.writeHead(200, {
    'content-type': contentType,
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
};

const ROUTES: Route[] = [
  { method: 'GET', pattern: /^\/v1\/info$/, handler: info },
  { method: 'GET', pattern: /^\/v1\/metrics$/, handler: metrics },
  { method: 'GET', pattern: /^\/v1\/openapi\.json$/, handler: openApi },
  { method: 'GET', pattern: /^\/v1\/tools$/, handler: tools },
  { method: 'GET', pattern: /^\/v1\/stats$/, handler: stats },
  { method: 'GET', pattern: /^\/v1\/events$/, handler: serverEvents },
  { method: 'GET', pattern: /^\/v1\/calls$/, handler: listCalls },
  { method: 'POST', pattern: /^\/v1\/calls$/, handler: startCall },
  { method: 'GET', pattern: new RegExp(`^/v1/calls/${ID}$`), handler: getCall },
  { method: 'GET', pattern: new RegExp(`^/v1/calls/${ID}/events$`), handler: events },
  { method: 'POST', pattern: new RegExp(`^/v1/calls/${ID}/cancel$`), handler: cancel },
  { method: 'GET', pattern: /^\/v1\/read$/, handler: read },
  { method: 'GET', pattern: /^\/v1\/search$/, handler: search },
  { method: 'GET', pattern: /^\/v1\/sessions$/, handler: sessions },
  { method: 'GET', pattern: new RegExp(`^/v1/sessions/${ID}/replay$`), handler: replay },
  { method: 'POST', pattern: new RegExp(`^/v1/sessions/${ID}/revert$`), handler: revert },
  { method: 'GET', pattern: /^\/v1\/store$/, handler: storeInfo },
  { method: 'POST', pattern: /^\/v1\/gc$/, handler: runGc },
  { method: 'POST', pattern: /^\/v1\/verify$/, handler: runVerify },
];

/** Every route's method and path pattern (test/server/openapi.test.ts matches them with the OpenAPI table). */
export function routeTable(): { method: string; pattern: RegExp }[] {
  return ROUTES.map((r) => ({ method: r.method, pattern: r.pattern }));
}

/** The handler for `method` and `pathname`, or the methods the path allows (405), or nothing (404). */
export function route(
  method: string,
  pathname: string,
): { handler: Handler; params: string[] } | { allow: string[] } | undefined {
  const allow: string[] = [];
  for (const r of ROUTES) {
    const m = r.pattern.exec(pathname);
    if (!m) continue;
    if (r.method === method) return { handler: r.handler, params: m.slice(1) };
    allow.push(r.method);
  }
  return allow.length > 0 ? { allow } : undefined;
}
