/**
 * sluice's public API (`import … from 'sluice'`). See docs/sdk.md for a tour;
 * tool authors import `sluice/tool`, the store is `sluice/store`, and the
 * wire schemas (zod) are `sluice/protocol`.
 */

export {
  type ArtifactReadTarget,
  artifactReadTarget,
  isArtifactRead,
  READ_TOOL,
  SEARCH_TOOL,
} from '../compaction/artifact-read.js';
export type {
  CompactionFailureReason,
  CompactionResult,
  CompactionTrigger,
  CompactOptions,
  Summarizer,
  SummarizerInput,
} from '../compaction/compact.js';
export { compact, isValidSummary, RETRY_CODES } from '../compaction/compact.js';
export type {
  AssistantItem,
  FinishedCall,
  HistoryItem,
  SummaryItem,
  ToolCallItem,
  ToolResultItem,
  UserItem,
} from '../compaction/history.js';
export { historyFromCalls, historyItemSchema, historySchema, parseHistory } from '../compaction/history.js';
export type { JsonObject, JsonValue } from '../compaction/json.js';
export { ARTIFACT_READ_OMITTED, pruneForRetry } from '../compaction/prune.js';
export { renderHistory } from '../compaction/render.js';
export type { ServerOptions, ServerToken } from '../server/index.js';
export { DEFAULT_HOST, DEFAULT_PORT, loadOrCreateToken, SluiceServer, startServer } from '../server/index.js';
export type { BatchCall, BatchOptions, BatchResult } from './batch/batch.js';
export { batchFailed } from './batch/batch.js';
export type { ApprovalPolicy, CallOptions, CallRecorder } from './call/call-types.js';
export type { CallHandle, EngineOpenOptions } from './engine.js';
export { defaultApproval, Engine } from './engine.js';
export type { ReadBytesResult, ReadOptions, ReadPageInfo, ReadResult } from './engine-read.js';
export type { SearchLine, SearchOptions, SearchResult } from './engine-search.js';
export type { LaggedMarker } from './events/hub.js';
export type {
  EffectiveBounds,
  FarmBatchOptions,
  FarmCall,
  FarmQueueOptions,
  FarmResult,
  FarmStatus,
  FarmWorkerEngine,
  FarmWorkerLoad,
  FarmWorkerOptions,
  QueueAddress,
  QueueBounds,
  RecordedResult,
  RecordOutcome,
} from './farm/index.js';
export {
  DEFAULT_BOUNDS,
  Delivery,
  FarmQueue,
  FarmWorker,
  MAX_CALL_BYTES,
  MAX_ID_BYTES,
  MAX_RESULT_BYTES,
  parseQueueUrl,
  QUEUE_ENV,
  queueFromEnv,
  runFarmBatch,
} from './farm/index.js';
export type { McpServerConfig } from './mcp/config.js';
export type { EngineOptions } from './options.js';
export type { ToolOutputOptions } from './presentation/options.js';
export * from './protocol/errors.js';
export type { Attachment, EmittedMessage, PreparedOperation, ToolIsolation } from './protocol/messages.js';
export { PROTOCOL_VERSION } from './protocol/messages.js';
export type { OutputDeclaration } from './protocol/streams.js';
export { MAX_STREAM_NAME_BYTES, MAX_STREAMS, validateDeclaration } from './protocol/streams.js';
export type { ToolInfo } from './registry.js';
export type { CallEvent, CallStatus, OutputRef, StreamRef, TerminalResult } from './result.js';
export type {
  EventLogContents,
  GcOptions,
  GcReport,
  MissingReference,
  ReplayedCall,
  ReplayedSession,
  RevertResult,
  SessionRecorderOptions,
  SessionReplay,
  SessionSummary,
  SessionVerifyReport,
} from './sessions/index.js';
export {
  collectGarbage,
  DEFAULT_GC_GRACE_MS,
  isSessionId,
  MAX_SESSION_ID_LENGTH,
  openReplay,
  readEventLog,
  replaySession,
  SessionRecorder,
  verifyWithSessions,
} from './sessions/index.js';
export type { SignalOptions } from './signals.js';
