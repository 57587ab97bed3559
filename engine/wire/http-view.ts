/** The bodies of the endpoints only the web view reads (docs/web.md); part of the wire contract (engine/wire/schemas.ts). */

import { z } from '../protocol/zod.js';
import { callStatusSchema, digestSchema, laggedEventSchema } from './shapes.js';

const count = z.number().int().nonnegative();
const isoTime = z.string();

/** Bytes and lines one stream has captured so far (from progress, then from the result). */
export const streamProgressSchema = z.object({ name: z.string(), bytes: count, lines: count });

/** One call of `GET /v1/calls` and of the `call` events of `GET /v1/events`. */
export const callSummarySchema = z.object({
  callId: z.string(),
  tool: z.string(),
  session: z.string().optional(),
  status: z.union([z.literal('running'), callStatusSchema]),
  /** False when the call ended without all its output (cancelled, timed out, crashed); null while it runs. */
  complete: z.boolean().nullable(),
  startedAt: isoTime,
  /** Milliseconds it ran, once ended; null while it runs. */
  durationMs: z.number().nonnegative().nullable(),
  streams: z.array(streamProgressSchema),
  /** The server's change counter when this summary was made: a larger one supersedes it. */
  version: count,
});

/** `GET /v1/calls` response: the running and retained calls, oldest first. */
export const callsResponseSchema = z.object({
  calls: z.array(callSummarySchema),
  /** The change counter now: every summary has a version of at most this. */
  version: count,
});

/** What `GET /v1/events` streams: a call's new summary, or how many the client missed. */
export const serverEventSchema = z.union([
  z.object({ type: z.literal('call'), call: callSummarySchema }),
  laggedEventSchema,
]);

/** `GET /v1/stats` response: the engine's counters since it opened (the chart takes differences). */
export const statsResponseSchema = z.object({
  callsStarted: count,
  callsEnded: count,
  /** Bytes captured by calls that ended, over all streams. */
  capturedBytes: count,
  /** Calls of this server still running. */
  running: count,
  at: isoTime,
});

/** A collection's report (`Engine.gc`, `sluice gc --json`). */
export const gcReportSchema = z.object({
  dryRun: z.boolean(),
  graceMs: count,
  scanned: count,
  kept: count,
  removed: count,
  bytesFreed: count,
  roots: count,
  pinned: count,
  young: count,
  restored: count,
  tmpReclaimed: count,
  tmpBytesReclaimed: count,
  pinsReclaimed: count,
  indexRemoved: count,
  trashRecovered: count,
  packs: count,
  packsRemoved: count,
  packedCopied: count,
  orphanGroupsKilled: count,
  durationMs: z.number().nonnegative(),
});

/** A verification's report (`Engine.verify`, `sluice verify --json`). */
export const verifyReportSchema = z.object({
  scanned: count,
  ok: count,
  corrupt: z.array(digestSchema),
  missing: z.array(digestSchema),
  tombstoned: z.array(digestSchema),
  unexpected: z.array(z.string()),
  quarantined: z.array(z.string()),
  repairFailed: z.array(z.string()),
  packed: count,
  tornPacks: z.array(z.string()),
  unreadablePacks: z.array(z.string()),
  records: z.array(
    z.object({
      session: z.string(),
      callId: z.string(),
      digest: digestSchema,
      role: z.enum(['output', 'manifest', 'stream', 'spill', 'text']),
    }),
  ),
  corruptLines: count,
});

/** `GET /v1/store` response. */
export const storeResponseSchema = z.object({
  root: z.string(),
  blobs: count,
  bytes: count,
  /** ISO time of the walk of blobs/ the counts come from (STORE_WALK_MS in server/view-routes.ts). */
  walkedAt: isoTime,
  /** The last collection this server ran, or null. */
  lastGc: z.object({ at: isoTime, report: gcReportSchema }).nullable(),
  /** The last verification this server ran, or null. */
  lastVerify: z.object({ at: isoTime, report: verifyReportSchema }).nullable(),
});

/** `POST /v1/gc` request body (optional). */
export const gcRequestSchema = z.strictObject({
  dryRun: z.boolean().optional(),
  graceMs: z.number().int().nonnegative().optional(),
});

/** `POST /v1/verify` request body (optional). */
export const verifyRequestSchema = z.strictObject({ repair: z.boolean().optional() });

/** `POST /v1/sessions/:id/revert` request body. */
export const revertRequestSchema = z.strictObject({ beforeCallId: z.string().min(1).max(256) });

/** `POST /v1/sessions/:id/revert` response. */
export const revertResponseSchema = z.object({ session: z.string(), reverted: z.array(z.string()) });
