/**
 * The wire contract: one zod schema for every shape that crosses a boundary
 * (worker ↔ engine messages, terminal results and their output references,
 * live call events, session event-log records, read pages, and the bodies of
 * the HTTP API). {@link PROTOCOL_VERSION} versions all of it; the JSON
 * Schema in docs/schema/sluice-protocol.json is generated from
 * {@link WIRE_SCHEMAS} (`npm run schema`) and a test fails when it drifts.
 *
 * The TypeScript types stay where their code lives (messages.ts, result.ts,
 * read.ts, sessions/); the compile-time checks at the end of this file fail
 * the build when a schema and its type disagree, so the two cannot drift
 * either. Event-log records reuse the lenient reading schemas of
 * engine/sessions/records.ts, tightened where the reader deliberately
 * accepts anything. That import (and the types of read.ts, result.ts and
 * sessions/) is why these schemas live here, on the main thread, and not in
 * engine/protocol/, which workers and the store load and which imports
 * nothing of sluice outside itself.
 */

import { ERROR_CODES, type SerializedError } from '../protocol/errors.js';
import {
  type CallTask,
  type DescribeResult,
  type DescribeTask,
  type EngineMessage,
  MAX_CHUNK_BYTES,
  PROTOCOL_VERSION,
  type ToolDescription,
  type WorkerMessage,
  wireCompletionSchema,
} from '../protocol/messages.js';
import { isStreamName, MAX_STREAM_NAME_BYTES, MAX_STREAMS, type OutputDeclaration } from '../protocol/streams.js';
import { z } from '../protocol/zod.js';
import type { ReadResult } from '../read.js';
import type { CallEvent, OutputRef, TerminalResult } from '../result.js';
import type { ReplayedSession, SessionSummary } from '../sessions/index.js';
import { completedRecordSchema, revertRecordSchema, spillRefSchema, startedRecordSchema } from '../sessions/records.js';

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
  startedAt: isoTime,
  durationMs: z.number().nonnegative(),
});

/** A live event of a call: started, display delta, completed (always last). */
export const callEventSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('started'),
    callId: z.string(),
    tool: z.string(),
    session: z.string().optional(),
    at: isoTime,
  }),
  z.object({ type: z.literal('display'), callId: z.string(), text: z.string() }),
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
});

/** A piscina task. */
export const taskSchema = z.discriminatedUnion('kind', [describeTaskSchema, callTaskSchema]);

/** A tool as a worker describes it. */
export const toolDescriptionSchema = z.object({
  name: z.string(),
  description: z.string(),
  output: outputDeclarationSchema,
  selfPaginating: z.boolean(),
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

// ── HTTP API bodies (docs/http.md) ──────────────────────────────────────────

/** `POST /v1/calls` request body. */
export const callRequestSchema = z.strictObject({
  tool: z.string().min(1).max(256),
  args: z.unknown().default({}),
  session: z.string().min(1).optional(),
  timeoutMs: z.number().int().positive().optional(),
});

/** `POST /v1/calls` response (202). */
export const callAcceptedSchema = z.object({ callId: z.string() });

/** `GET /v1/calls/:id` while the call runs (202). */
export const callPendingSchema = z.object({
  callId: z.string(),
  tool: z.string(),
  session: z.string().optional(),
  status: z.literal('running'),
  startedAt: isoTime,
});

/** `POST /v1/calls/:id/cancel` request body (optional). */
export const cancelRequestSchema = z.strictObject({ reason: z.string().max(1000).optional() });

/** `POST /v1/calls/:id/cancel` response: 202 `cancelling` while it runs, 200 with the terminal status once ended. */
export const cancelResponseSchema = z.object({
  callId: z.string(),
  status: z.union([z.literal('cancelling'), callStatusSchema]),
});

/** `GET /v1/read` query parameters (decimal strings). */
export const readQuerySchema = z.strictObject({
  filePath: z.string().min(1),
  offset: z
    .string()
    .regex(/^[0-9]{1,15}$/)
    .optional(),
  limit: z
    .string()
    .regex(/^[0-9]{1,15}$/)
    .optional(),
  byteOffset: z
    .string()
    .regex(/^[0-9]{1,15}$/)
    .optional(),
});

/** The body of every error response except 401 (which has none). */
export const errorBodySchema = z.object({ error: z.object({ code: errorCodeSchema, message: z.string() }) });

/** One tool in `GET /v1/tools`. */
export const toolSummarySchema = z.object({
  name: z.string(),
  description: z.string(),
  source: z.enum(['builtin', 'plugin', 'mcp']),
  output: outputDeclarationSchema,
  selfPaginating: z.boolean(),
  argsSchema: z.unknown(),
});

/** `GET /v1/tools` response. */
export const toolsResponseSchema = z.object({ tools: z.array(toolSummarySchema) });

/** One session in `GET /v1/sessions`. */
export const sessionSummarySchema = z.object({
  id: z.string(),
  calls: count,
  reverted: count,
  interrupted: count,
  corruptLines: count,
  bytes: count,
  referencedBytes: count,
  updatedAt: isoTime,
});

/** `GET /v1/sessions` response. */
export const sessionsResponseSchema = z.object({ sessions: z.array(sessionSummarySchema) });

/** One call of `GET /v1/sessions/:id/replay`. */
export const replayedCallSchema = z.object({
  callId: z.string(),
  tool: z.string(),
  args: z.unknown(),
  result: terminalResultSchema,
  interrupted: z.boolean(),
  unavailable: z.array(z.string()).optional(),
});

/** `GET /v1/sessions/:id/replay` response. */
export const replayedSessionSchema = z.object({
  session: z.string(),
  calls: z.array(replayedCallSchema),
  reverted: count,
  corruptLines: count,
  skippedLines: count,
});

/** `GET /v1/info` response. */
export const infoResponseSchema = z.object({
  name: z.literal('sluice'),
  version: z.string(),
  protocolVersion: z.literal(PROTOCOL_VERSION),
});

// ── The registry the JSON Schema is generated from ──────────────────────────

/** How a schema is published: its `$defs` name, a description, and whether it describes input (requests). */
export interface WireSchemaEntry {
  schema: z.ZodType;
  description: string;
  /** Requests are described as the client sends them (defaults not yet applied). */
  io: 'input' | 'output';
}

/** Every published schema by its `$defs` name, in document order. */
export const WIRE_SCHEMAS: Readonly<Record<string, WireSchemaEntry>> = {
  ErrorCode: { schema: errorCodeSchema, description: 'A stable error code.', io: 'output' },
  SerializedError: { schema: serializedErrorSchema, description: 'An error as it crosses a boundary.', io: 'output' },
  OutputDeclaration: { schema: outputDeclarationSchema, description: "A tool's output declaration.", io: 'output' },
  Attachment: { schema: attachmentSchema, description: 'An attachment: base64 bytes.', io: 'output' },
  EmittedMessage: { schema: emittedMessageSchema, description: 'A message a tool emits.', io: 'output' },
  StreamRef: { schema: streamRefSchema, description: 'One published stream of named output.', io: 'output' },
  OutputRef: { schema: outputRefSchema, description: "References to a call's published output.", io: 'output' },
  TerminalResult: { schema: terminalResultSchema, description: 'The terminal result of a call.', io: 'output' },
  CallEvent: { schema: callEventSchema, description: 'A live event of a call.', io: 'output' },
  LaggedEvent: { schema: laggedEventSchema, description: 'A subscriber fell behind.', io: 'output' },
  SubscriptionEvent: { schema: subscriptionEventSchema, description: 'What a subscription yields.', io: 'output' },
  ReadPage: { schema: readPageSchema, description: 'One page of a read.', io: 'output' },
  Task: { schema: taskSchema, description: 'A worker task (piscina).', io: 'output' },
  DescribeResult: { schema: describeResultSchema, description: 'What a describe task returns.', io: 'output' },
  WorkerMessage: { schema: workerMessageSchema, description: 'Worker → engine message.', io: 'output' },
  EngineMessage: { schema: engineMessageSchema, description: 'Engine → worker message.', io: 'output' },
  CallStartedRecord: { schema: callStartedRecordSchema, description: 'Event log: call.started.', io: 'output' },
  CallCompletedRecord: { schema: callCompletedRecordSchema, description: 'Event log: call.completed.', io: 'output' },
  SessionRevertRecord: { schema: sessionRevertRecordSchema, description: 'Event log: session.revert.', io: 'output' },
  EventLogRecord: { schema: eventLogRecordSchema, description: 'Any event-log record.', io: 'output' },
  SpillRef: { schema: spillRefSchema, description: "Where a record's oversized fields went.", io: 'output' },
  CallRequest: { schema: callRequestSchema, description: 'HTTP: POST /v1/calls body.', io: 'input' },
  CallAccepted: { schema: callAcceptedSchema, description: 'HTTP: POST /v1/calls 202.', io: 'output' },
  CallPending: { schema: callPendingSchema, description: 'HTTP: GET /v1/calls/:id 202.', io: 'output' },
  CancelRequest: { schema: cancelRequestSchema, description: 'HTTP: POST /v1/calls/:id/cancel body.', io: 'input' },
  CancelResponse: { schema: cancelResponseSchema, description: 'HTTP: cancel response.', io: 'output' },
  ReadQuery: { schema: readQuerySchema, description: 'HTTP: GET /v1/read query.', io: 'input' },
  ErrorBody: { schema: errorBodySchema, description: 'HTTP: error response body.', io: 'output' },
  ToolsResponse: { schema: toolsResponseSchema, description: 'HTTP: GET /v1/tools.', io: 'output' },
  SessionsResponse: { schema: sessionsResponseSchema, description: 'HTTP: GET /v1/sessions.', io: 'output' },
  ReplayedSession: { schema: replayedSessionSchema, description: 'HTTP: GET /v1/sessions/:id/replay.', io: 'output' },
  InfoResponse: { schema: infoResponseSchema, description: 'HTTP: GET /v1/info.', io: 'output' },
};

// ── Compile-time agreement of schemas and types ─────────────────────────────

/** True when A and B are mutually assignable. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** True when A is assignable to B. */
type Fits<A, B> = [A] extends [B] ? true : false;

/**
 * Each entry must be `true`: a schema changed without its type (or the
 * reverse) fails the build here, naming the pair.
 */
export type WireTypeChecks = {
  serializedError: Same<z.infer<typeof serializedErrorSchema>, SerializedError>;
  outputDeclaration: Same<z.infer<typeof outputDeclarationSchema>, OutputDeclaration>;
  outputRef: Same<z.infer<typeof outputRefSchema>, OutputRef>;
  terminalResult: Same<z.infer<typeof terminalResultSchema>, TerminalResult>;
  callEvent: Same<z.infer<typeof callEventSchema>, CallEvent>;
  readPage: Same<z.infer<typeof readPageSchema>, ReadResult>;
  describeTask: Same<z.infer<typeof describeTaskSchema>, DescribeTask>;
  callTask: Same<z.infer<typeof callTaskSchema>, CallTask>;
  toolDescription: Same<z.infer<typeof toolDescriptionSchema>, ToolDescription>;
  describeResult: Same<z.infer<typeof describeResultSchema>, DescribeResult>;
  workerMessage: Same<z.infer<typeof workerMessageSchema>, WorkerMessage>;
  engineMessage: Same<z.infer<typeof engineMessageSchema>, EngineMessage>;
  sessionSummary: Same<z.infer<typeof sessionSummarySchema>, SessionSummary>;
  replayedSession: Fits<z.infer<typeof replayedSessionSchema>, ReplayedSession>;
};

const typeChecks: { [K in keyof WireTypeChecks]: WireTypeChecks[K] } = {
  serializedError: true,
  outputDeclaration: true,
  outputRef: true,
  terminalResult: true,
  callEvent: true,
  readPage: true,
  describeTask: true,
  callTask: true,
  toolDescription: true,
  describeResult: true,
  workerMessage: true,
  engineMessage: true,
  sessionSummary: true,
  replayedSession: true,
};
void typeChecks;
