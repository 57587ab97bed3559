/**
 * sluice's public API. See docs/sdk.md for a tour.
 */
export type { ApprovalPolicy, CallOptions, CallRecorder } from './call.js';
export type { CallHandle, EngineOpenOptions } from './engine.js';
export { defaultApproval, Engine } from './engine.js';
export type { EngineOptions } from './options.js';
export type { ToolOutputOptions } from './presentation/options.js';
export * from './protocol/errors.js';
export type { Attachment, EmittedMessage, PreparedOperation } from './protocol/messages.js';
export { PROTOCOL_VERSION } from './protocol/messages.js';
export type { OutputDeclaration } from './protocol/streams.js';
export { MAX_STREAM_NAME_BYTES, MAX_STREAMS, validateDeclaration } from './protocol/streams.js';
export type { ToolInfo } from './registry.js';
export type { CallEvent, CallStatus, OutputRef, StreamRef, TerminalResult } from './result.js';
