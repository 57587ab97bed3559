/**
 * The wire contract (`sluice/protocol`): one zod schema for every shape that
 * crosses a boundary, versioned by {@link PROTOCOL_VERSION}, with the JSON
 * Schema generated from {@link WIRE_SCHEMAS} (a test fails on drift). The
 * TypeScript types stay where their code lives; the checks at the end fail
 * the build when a schema and its type disagree. Event-log records reuse the
 * reading schemas of engine/sessions/records.ts, which is why this lives on
 * the main thread and not in engine/protocol/.
 */

import type { BatchResult } from '../batch/batch.js';
import type { ReadResult } from '../engine-read.js';
import type { SearchResult } from '../engine-search.js';
import type { SerializedError } from '../protocol/errors.js';
import type {
  CallTask,
  DescribeResult,
  DescribeTask,
  EngineMessage,
  ToolDescription,
  WorkerMessage,
} from '../protocol/messages.js';
import type { OutputDeclaration } from '../protocol/streams.js';
import type { z } from '../protocol/zod.js';
import type { CallEvent, OutputRef, TerminalResult } from '../result.js';
import type { RevertResult } from '../sessions/catalog.js';
import type { GcReport } from '../sessions/gc.js';
import type { ReplayedSession, SessionSummary } from '../sessions/index.js';
import type { SessionVerifyReport } from '../sessions/verify-references.js';
import {
  callAcceptedSchema,
  callPendingSchema,
  callRequestSchema,
  cancelRequestSchema,
  cancelResponseSchema,
  errorBodySchema,
  infoResponseSchema,
  readQuerySchema,
  replayedSessionSchema,
  searchQuerySchema,
  type sessionSummarySchema,
  sessionsResponseSchema,
  toolsResponseSchema,
} from './http-bodies.js';
import {
  callSummarySchema,
  callsResponseSchema,
  gcReportSchema,
  gcRequestSchema,
  revertRequestSchema,
  revertResponseSchema,
  serverEventSchema,
  statsResponseSchema,
  storeResponseSchema,
  verifyReportSchema,
  verifyRequestSchema,
} from './http-view.js';
import {
  attachmentSchema,
  batchResultSchema,
  callCompletedRecordSchema,
  callEventSchema,
  callStartedRecordSchema,
  type callTaskSchema,
  describeResultSchema,
  type describeTaskSchema,
  emittedMessageSchema,
  engineMessageSchema,
  errorCodeSchema,
  eventLogRecordSchema,
  laggedEventSchema,
  outputDeclarationSchema,
  outputRefSchema,
  readPageSchema,
  searchResultSchema,
  serializedErrorSchema,
  sessionRevertRecordSchema,
  spillRefSchema,
  streamRefSchema,
  subscriptionEventSchema,
  taskSchema,
  terminalResultSchema,
  type toolDescriptionSchema,
  workerMessageSchema,
} from './shapes.js';

export * from './http-bodies.js';
export * from './http-view.js';
export * from './shapes.js';

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
  BatchResult: {
    schema: batchResultSchema,
    description: 'One result of a batch (a sluice batch output line).',
    io: 'output',
  },
  CallEvent: { schema: callEventSchema, description: 'A live event of a call.', io: 'output' },
  LaggedEvent: { schema: laggedEventSchema, description: 'A subscriber fell behind.', io: 'output' },
  SubscriptionEvent: { schema: subscriptionEventSchema, description: 'What a subscription yields.', io: 'output' },
  ReadPage: { schema: readPageSchema, description: 'One page of a read.', io: 'output' },
  SearchResult: { schema: searchResultSchema, description: 'One page of a search.', io: 'output' },
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
  SearchQuery: { schema: searchQuerySchema, description: 'HTTP: GET /v1/search query.', io: 'input' },
  ErrorBody: { schema: errorBodySchema, description: 'HTTP: error response body.', io: 'output' },
  ToolsResponse: { schema: toolsResponseSchema, description: 'HTTP: GET /v1/tools.', io: 'output' },
  SessionsResponse: { schema: sessionsResponseSchema, description: 'HTTP: GET /v1/sessions.', io: 'output' },
  ReplayedSession: { schema: replayedSessionSchema, description: 'HTTP: GET /v1/sessions/:id/replay.', io: 'output' },
  InfoResponse: { schema: infoResponseSchema, description: 'HTTP: GET /v1/info.', io: 'output' },
  CallSummary: { schema: callSummarySchema, description: 'HTTP: one call of GET /v1/calls.', io: 'output' },
  CallsResponse: { schema: callsResponseSchema, description: 'HTTP: GET /v1/calls.', io: 'output' },
  ServerEvent: { schema: serverEventSchema, description: 'HTTP: an event of GET /v1/events.', io: 'output' },
  StatsResponse: { schema: statsResponseSchema, description: 'HTTP: GET /v1/stats.', io: 'output' },
  GcReport: { schema: gcReportSchema, description: 'A garbage collection report.', io: 'output' },
  VerifyReport: { schema: verifyReportSchema, description: 'A store verification report.', io: 'output' },
  StoreResponse: { schema: storeResponseSchema, description: 'HTTP: GET /v1/store.', io: 'output' },
  GcRequest: { schema: gcRequestSchema, description: 'HTTP: POST /v1/gc body.', io: 'input' },
  VerifyRequest: { schema: verifyRequestSchema, description: 'HTTP: POST /v1/verify body.', io: 'input' },
  RevertRequest: { schema: revertRequestSchema, description: 'HTTP: POST /v1/sessions/:id/revert body.', io: 'input' },
  RevertResponse: {
    schema: revertResponseSchema,
    description: 'HTTP: POST /v1/sessions/:id/revert.',
    io: 'output',
  },
};

// ── Compile-time agreement of schemas and types ─────────────────────────────

/** True when A and B are mutually assignable. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** True when A is assignable to B. */
type Fits<A, B> = [A] extends [B] ? true : false;

/** Each entry must be `true`: a schema changed without its type, or the reverse, fails the build here. */
export type WireTypeChecks = {
  serializedError: Same<z.infer<typeof serializedErrorSchema>, SerializedError>;
  outputDeclaration: Same<z.infer<typeof outputDeclarationSchema>, OutputDeclaration>;
  outputRef: Same<z.infer<typeof outputRefSchema>, OutputRef>;
  terminalResult: Same<z.infer<typeof terminalResultSchema>, TerminalResult>;
  batchResult: Same<z.infer<typeof batchResultSchema>, BatchResult>;
  callEvent: Same<z.infer<typeof callEventSchema>, CallEvent>;
  readPage: Same<z.infer<typeof readPageSchema>, ReadResult>;
  searchResult: Same<z.infer<typeof searchResultSchema>, SearchResult>;
  describeTask: Same<z.infer<typeof describeTaskSchema>, DescribeTask>;
  callTask: Same<z.infer<typeof callTaskSchema>, CallTask>;
  toolDescription: Same<z.infer<typeof toolDescriptionSchema>, ToolDescription>;
  describeResult: Same<z.infer<typeof describeResultSchema>, DescribeResult>;
  workerMessage: Same<z.infer<typeof workerMessageSchema>, WorkerMessage>;
  engineMessage: Same<z.infer<typeof engineMessageSchema>, EngineMessage>;
  sessionSummary: Same<z.infer<typeof sessionSummarySchema>, SessionSummary>;
  replayedSession: Fits<z.infer<typeof replayedSessionSchema>, ReplayedSession>;
  gcReport: Same<z.infer<typeof gcReportSchema>, GcReport>;
  verifyReport: Same<z.infer<typeof verifyReportSchema>, SessionVerifyReport>;
  revertResponse: Same<z.infer<typeof revertResponseSchema>, RevertResult>;
};

const typeChecks: { [K in keyof WireTypeChecks]: WireTypeChecks[K] } = {
  serializedError: true,
  outputDeclaration: true,
  outputRef: true,
  terminalResult: true,
  batchResult: true,
  callEvent: true,
  readPage: true,
  searchResult: true,
  describeTask: true,
  callTask: true,
  toolDescription: true,
  describeResult: true,
  workerMessage: true,
  engineMessage: true,
  sessionSummary: true,
  replayedSession: true,
  gcReport: true,
  verifyReport: true,
  revertResponse: true,
};
void typeChecks;
