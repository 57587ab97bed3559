/** Sessions: the durable event log, replay, revert, garbage collection and verify (docs/operations.md). */

export type { RevertResult, SessionSummary } from './catalog.js';
export { deleteSession, listSessionIds, listSessions, revertSession } from './catalog.js';
export type { GcOptions, GcReport, GcStep } from './gc.js';
export { collectGarbage, DEFAULT_GC_GRACE_MS } from './gc.js';
export type { EventLogContents } from './log-reader.js';
export { readEventLog } from './log-reader.js';
export type { LogWriterStats } from './log-writer.js';
export type { SessionRecorderOptions } from './recorder.js';
export { SessionRecorder } from './recorder.js';
export type { ReplayedCall, ReplayedSession, SessionReplay } from './replay.js';
export { openReplay, replaySession } from './replay.js';
export { assertSessionId, isSessionId, MAX_SESSION_ID_LENGTH } from './session-id.js';
export type { MissingReference, SessionVerifyReport } from './verify-references.js';
export { verifyWithSessions } from './verify-references.js';
