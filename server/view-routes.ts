/**
 * The endpoints the web view needs beyond calls, reads and sessions
 * (docs/http.md, docs/web.md): the server's calls as a list and as one live
 * stream of summaries, the engine's counters for the chart, the store's size
 * with the last collection and verification this server ran (and running
 * them), and reverting a session. They are ordinary API routes: bearer
 * token, JSON, the same errors; the page uses nothing else.
 */
import type { z } from '../engine/protocol/zod.js';
import type { GcReport } from '../engine/sessions/gc.js';
import type { SessionVerifyReport } from '../engine/sessions/verify-references.js';
import {
  type callsResponseSchema,
  gcRequestSchema,
  revertRequestSchema,
  type statsResponseSchema,
  type storeResponseSchema,
  verifyRequestSchema,
} from '../engine/wire/schemas.js';
import { parseWith, readJsonBody, sendJson } from './http.js';
import { onlyParams } from './query.js';
import type { Handler } from './routes.js';
import { SSE_HEADERS, sseWriter } from './sse.js';

/** The last collection and verification this server ran. */
export interface LastReports {
  gc?: { at: string; report: GcReport };
  verify?: { at: string; report: SessionVerifyReport };
}

/** How old the store's counts in `GET /v1/store` may be: a walk of blobs/ costs a stat per blob. */
const STORE_WALK_MS = 5000;

export const listCalls: Handler = async (ctx, _req, res, _p, url) => {
  onlyParams(url, [], 'GET /v1/calls');
  const version = ctx.tracker.version;
  const body: z.output<typeof callsResponseSchema> = { calls: ctx.tracker.list(), version };
  sendJson(res, 200, body);
};

/**
 * `GET /v1/events`: every call's new summary as it changes, as server-sent
 * events (`event: call`), from a bounded subscription: a client that reads
 * too slowly gets `event: lagged` and should list the calls again. Unnumbered
 * (no resume): the list is the state, the events only keep it fresh.
 */
export const serverEvents: Handler = async (ctx, req, res, _p, url) => {
  onlyParams(url, [], 'GET /v1/events');
  const sub = ctx.tracker.summaries.subscribe();
  const stop = () => void sub.return?.();
  res.on('close', stop);
  req.socket.setNoDelay(true);
  res.writeHead(200, SSE_HEADERS);
  const writer = sseWriter(res, ctx.heartbeatMs);
  const run = (async () => {
    try {
      if (!(await writer.write('retry: 1000\n\n'))) return;
      for await (const item of sub) {
        const frame =
          'type' in item
            ? `event: lagged\ndata: ${JSON.stringify(item)}\n\n`
            : `event: call\ndata: ${JSON.stringify({ type: 'call', call: item })}\n\n`;
        if (!(await writer.write(frame))) return;
      }
      // 'finish' never comes when the connection is cut first (shutdown's grace ran out): 'close' does.
      await new Promise<void>((resolve) => {
        if (res.destroyed) return resolve();
        res.once('close', resolve);
        res.end(resolve);
      });
    } finally {
      writer.stop();
      res.off('close', stop);
      await sub.return?.();
    }
  })();
  ctx.streams.add(run);
  try {
    await run;
  } finally {
    ctx.streams.delete(run);
  }
};

export const stats: Handler = async (ctx, _req, res, _p, url) => {
  onlyParams(url, [], 'GET /v1/stats');
  const { counters } = ctx.engine.metricsSnapshot();
  let started = 0;
  for (const n of counters.started.values()) started += n;
  let ended = 0;
  for (const byStatus of counters.ended.values()) for (const n of byStatus.values()) ended += n;
  let bytes = 0;
  for (const n of counters.bytes.values()) bytes += n;
  const body: z.output<typeof statsResponseSchema> = {
    callsStarted: started,
    callsEnded: ended,
    capturedBytes: bytes,
    running: ctx.tracker.active,
    at: new Date().toISOString(),
  };
  sendJson(res, 200, body);
};

export const storeInfo: Handler = async (ctx, _req, res, _p, url) => {
  onlyParams(url, [], 'GET /v1/store');
  const size = await ctx.storeSize.get(STORE_WALK_MS);
  const body: z.output<typeof storeResponseSchema> = {
    root: ctx.engine.store.root,
    blobs: size.blobs,
    bytes: size.bytes,
    walkedAt: new Date(size.at).toISOString(),
    lastGc: ctx.reports.gc ?? null,
    lastVerify: ctx.reports.verify ?? null,
  };
  sendJson(res, 200, body);
};

export const runGc: Handler = async (ctx, req, res, _p, url) => {
  onlyParams(url, [], 'POST /v1/gc');
  const body = parseWith(gcRequestSchema, await readJsonBody(req, ctx.maxBodyBytes, {}), 'POST /v1/gc body');
  const report = await ctx.engine.gc({
    ...(body.dryRun !== undefined ? { dryRun: body.dryRun } : {}),
    ...(body.graceMs !== undefined ? { graceMs: body.graceMs } : {}),
  });
  ctx.reports.gc = { at: new Date().toISOString(), report };
  ctx.storeSize.invalidate();
  sendJson(res, 200, report);
};

export const runVerify: Handler = async (ctx, req, res, _p, url) => {
  onlyParams(url, [], 'POST /v1/verify');
  const body = parseWith(verifyRequestSchema, await readJsonBody(req, ctx.maxBodyBytes, {}), 'POST /v1/verify body');
  const report = await ctx.engine.verify(body.repair !== undefined ? { repair: body.repair } : {});
  ctx.reports.verify = { at: new Date().toISOString(), report };
  ctx.storeSize.invalidate();
  sendJson(res, 200, report);
};

export const revert: Handler = async (ctx, req, res, [id], url) => {
  onlyParams(url, [], 'POST /v1/sessions/:id/revert');
  const body = parseWith(revertRequestSchema, await readJsonBody(req, ctx.maxBodyBytes), 'revert body');
  sendJson(res, 200, await ctx.engine.revert(id as string, body.beforeCallId));
};
