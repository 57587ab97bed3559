import { farmResultSchema } from '../farm/records.js';
import { ERROR_CODES } from '../protocol/errors.js';
import { MAX_CHUNK_BYTES, wireCompletionSchema } from '../protocol/messages.js';
import { sandboxPolicySchema } from '../protocol/sandbox.js';
import {
  isStreamName,
  MAX_STREAM_NAME_BYTES,
  MAX_STREAMS,
  PREVIEW_MODES,
  type PreviewMode,
} from '../protocol/streams.js';
import { z } from '../protocol/zod.js';
import { completedRecordSchema, revertRecordSchema, startedRecordSchema } from '../sessions/records.js';

export { PROTOCOL_VERSION } from '../protocol/messages.js';

// ── Building blocks ─────────────────────────────────────────────────────────

/** One of the stable error codes (`ERROR_CODES`). */
export const errorCodeSchema = z.enum(ERROR_CODES);

/** An error as it crosses a boundary: `{ code, message, details? }`. */
export const serializedErrorSchema = z.object({
  code: errorCodeSchema,
  message: z.string(),
  details: z.record(z.string(), z.unknown()).optional(),
});

/** A SHA-256 digest: 64 lowercase hex digits. */
export const digestSchema = z.string().regex(/^[0-9a-f]{64}$/);

/**
 * A stream name. Validation is the one rule of engine/protocol/streams.ts
 * (`isStreamName`); the pattern states the same rule for JSON Schema, and a
 * property test keeps the two equal.
 */
export const streamNameSchema = z
  .string()
  .regex(new RegExp(`^(?!\\.\\.?$)[A-Za-z0-9._-]{1,${MAX_STREAM_NAME_BYTES}}$`))
  .refine(isStreamName, { message: 'not a valid stream name' });

/** A preview mode: `head` or `head+tail`. */
export const previewModeSchema = z.enum(PREVIEW_MODES as [PreviewMode, ...PreviewMode[]]);

/** A tool's output declaration. */
export const outputDeclarationSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('single') }),
  z.object({
    kind: z.literal('streams'),
    streams: z.array(streamNameSchema).min(1).max(MAX_STREAMS).readonly().meta({ uniqueItems: true }),
  }),
]);

/** An attachment (image, PDF): base64 bytes and their media type. */
export const attachmentSchema = z.object({
  mediaType: z.string().min(1),
  data: z.string(),
  name: z.string().optional(),
});

/** A message a tool emits into the conversation. */
export const emittedMessageSchema = z.object({ role: z.enum(['user', 'system']), content: z.string() });

const count = z.number().int().nonnegative();
const isoTime = z.string();

// ── Results and events ──────────────────────────────────────────────────────

/** One published stream of named output. */
export const streamRefSchema = z.object({
  name: streamNameSchema,
  digest: digestSchema,
  bytes: count,
  lines: count,
  truncated: z.boolean(),
});

/** References to a call's published output (`page`: a self-paginating tool's page, not retained). */
export const outputRefSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('single'), digest: digestSchema, bytes: count, lines: count, truncated: z.boolean() }),
  z.object({ kind: z.literal('streams'), manifest: digestSchema, streams: z.array(streamRefSchema).max(MAX_STREAMS) }),
  z.object({ kind: z.literal('page'), bytes: count, lines: count }),
]);

/** The variants of {@link outputRefSchema}: a single artifact, a manifest of streams, a page. */
export const [singleOutputRefSchema, streamsOutputRefSchema, pageOutputRefSchema] = outputRefSchema.options;

/** How a call ended. */
export const callStatusSchema = z.enum(['success', 'failed', 'cancelled']);

/** A text kept whole as an artifact because the result holds it cut to its bound. */
export const textRefSchema = z.object({ digest: digestSchema, bytes: count });

/** Where the whole error message and final display are, when they were cut. */
export const fullTextRefsSchema = z.object({ error: textRefSchema.optional(), display: textRefSchema.optional() });

/** The terminal result of a call (engine, session log, `sluice run --json`, HTTP). */
export const terminalResultSchema = z.object({
  callId: z.string().min(1),
  tool: z.string(),
  session: z.string().optional(),
  status: callStatusSchema,
  complete: z.boolean(),
  display: z.string(),
  model: z.string(),
  output: outputRefSchema.nullable(),
  metadata: z.record(z.string(), z.unknown()),
  attachments: z.array(attachmentSchema),
  messages: z.array(emittedMessageSchema),
  error: serializedErrorSchema.optional(),
  fullText: fullTextRefsSchema.optional(),
  sandbox: sandboxPolicySchema.optional(),
  startedAt: isoTime,
  durationMs: z.number().nonnegative(),
});

/** One result of a batch: an item of `Engine.batch`, a line of `sluice batch`'s output. */
export const batchResultSchema = z.object({
  id: z.string().nullable(),
  index: z.number().int().nonnegative(),
  result: terminalResultSchema.optional(),
  farm: farmResultSchema.optional(),
  error: z.object({ code: errorCodeSchema, message: z.string() }).optional(),
  resumed: z.literal(true).optional(),
});

/** A live event of a call: started, display delta, progress, completed (always last). */
export const callEventSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('started'),
    callId: z.string(),
    tool: z.string(),
    session: z.string().optional(),
    at: isoTime,
  }),
  z.object({ type: z.literal('display'), callId: z.string(), text: z.string() }),
  z.object({
    type: z.literal('progress'),
    callId: z.string(),
    elapsedMs: count,
    streams: z.array(z.object({ name: z.string(), bytes: count, lines: count })).max(MAX_STREAMS),
  }),
  z.object({ type: z.literal('completed'), callId: z.string(), result: terminalResultSchema }),
]);

/** What a subscriber that fell behind receives instead of the events it missed. */
export const laggedEventSchema = z.object({ type: z.literal('lagged'), dropped: z.number().int().positive() });

/** Everything a live subscription yields: call events and lagged markers. */
export const subscriptionEventSchema = z.union([callEventSchema, laggedEventSchema]);

/** One page read through the `read` tool (`Engine.read`, `sluice read --json`, `GET /v1/read`). */
export const readPageSchema = z.object({
  content: z.string(),
  offset: count,
  lines: count,
  totalLines: count,
  nextOffset: count.nullable(),
  nextByteOffset: count.nullable(),
  lossy: z.boolean(),
  attachments: z.array(attachmentSchema).optional(),
});

/** One line of a search page: zero-based `line` (a read offset), the text, match or context. */
export const searchLineSchema = z.object({
  line: count,
  text: z.string(),
  match: z.boolean(),
  cut: count.optional(),
});

/** A search page: `Engine.search`, `sluice grep --json`, `GET /v1/search`. */
export const searchResultSchema = z.object({
  content: z.string(),
  lines: z.array(searchLineSchema),
  matches: count,
  offset: count,
  totalLines: count,
  nextOffset: count.nullable(),
  longLines: count,
});

// ── Worker ↔ engine ─────────────────────────────────────────────────────────

/** Task: describe the tool a module exports. */
export const describeTaskSchema = z.object({ kind: z.literal('describe'), module: z.string() });

/** Task: run one call. */
export const callTaskSchema = z.object({
  kind: z.literal('call'),
  module: z.string(),
  callId: z.string(),
  args: z.unknown(),
  window: z.number().int().positive(),
  cwd: z.string(),
  storeDir: z.string(),
  displayBytes: z.number().int().positive(),
  askOnly: z.array(z.string()).optional(),
  sandbox: sandboxPolicySchema.optional(),
});

/** A piscina task. */
export const taskSchema = z.discriminatedUnion('kind', [describeTaskSchema, callTaskSchema]);

/** Whether a tool's calls may share a worker thread. */
export const toolIsolationSchema = z.enum(['shared', 'thread']);

/** A tool as a worker describes it. */
export const toolDescriptionSchema = z.object({
  name: z.string(),
  description: z.string(),
  output: outputDeclarationSchema,
  selfPaginating: z.boolean(),
  isolation: toolIsolationSchema,
  preview: previewModeSchema.optional(),
  argsSchema: z.unknown(),
});

/** What a describe task resolves to (a failure travels as a value). */
export const describeResultSchema = z.union([toolDescriptionSchema, z.object({ error: serializedErrorSchema })]);

/** A chunk's bytes: a transferred Uint8Array, never JSON. */
const chunkBytes = z
  .custom<Uint8Array>((v) => v instanceof Uint8Array && v.length <= MAX_CHUNK_BYTES)
  .meta({ description: `Uint8Array (structured clone, transferred), at most ${MAX_CHUNK_BYTES} bytes, any bytes` });

/** Worker → engine, on the worker's port (`c` is the call id, `s` the stream index, `n` display credit). */
export const workerMessageSchema = z.discriminatedUnion('t', [
  z.object({ t: z.literal('start'), c: z.string(), output: outputDeclarationSchema }),
  z.object({ t: z.literal('chunk'), c: z.string(), s: count, b: chunkBytes }),
  z.object({ t: z.literal('display'), c: z.string(), text: z.string(), n: count }),
  // A process group id: 0 and 1 are never one a tool started (the engine ignores them).
  z.object({ t: z.literal('proc'), c: z.string(), pid: z.number().int().min(2) }),
  z.object({ t: z.literal('rpc'), c: z.string(), m: z.unknown() }),
  // Part of a text the worker cut to its bound (an error message, a final display), sent whole ahead of done/fail.
  z.object({ t: z.literal('text'), c: z.string(), k: z.enum(['error', 'display']), b: chunkBytes }),
  z.object({ t: z.literal('done'), c: z.string(), completion: wireCompletionSchema }),
  z.object({
    t: z.literal('fail'),
    c: z.string(),
    error: serializedErrorSchema,
    cancelled: z.boolean(),
    cut: count.optional(),
  }),
]);

/** Engine → worker, on the worker's port. */
export const engineMessageSchema = z.discriminatedUnion('t', [
  z.object({ t: z.literal('credit'), c: z.string(), n: z.number().int().positive() }),
  z.object({ t: z.literal('abort'), c: z.string(), reason: z.string() }),
  z.object({ t: z.literal('abandon'), c: z.string() }),
  z.object({ t: z.literal('rpc'), c: z.string(), m: z.unknown() }),
]);

// ── Session event-log records (the layout this version writes) ──────────────

/** A `call.started` record. */
export const callStartedRecordSchema = startedRecordSchema.extend({ output: outputDeclarationSchema.optional() });

/** A `call.completed` record: the terminal result; oversized fields may sit in a spill blob (`spill`). */
export const callCompletedRecordSchema = completedRecordSchema.extend({
  output: outputRefSchema.nullable().optional(),
  attachments: z.array(attachmentSchema).optional(),
  messages: z.array(emittedMessageSchema).optional(),
  error: serializedErrorSchema.optional(),
});

/** A `session.revert` record. */
export const sessionRevertRecordSchema = revertRecordSchema;

/** Any event-log record (the JSON after each line's 16-hex checksum and space). */
export const eventLogRecordSchema = z.discriminatedUnion('type', [
  callStartedRecordSchema,
  callCompletedRecordSchema,
  sessionRevertRecordSchema,
]);

export { spillRefSchema } from '../sessions/records.js';
