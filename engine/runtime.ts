/**
 * What an open engine runs on beyond engine.ts and its pool, imported by
 * Engine.open once the first worker has started, so that the worker boots on
 * another core while this thread loads these (docs/architecture.md, "Opening an engine").
 */
export { resolveStoreLocation } from '../store/location.js';
export { Store } from '../store/store.js';
export { BUILTIN_TOOLS } from './builtins/descriptions.js';
export { RunningCalls } from './call/running-calls.js';
export { READ_TOOL, readArgs, readCallOptions, readResultOf } from './engine-read.js';
export { EventHub } from './events/hub.js';
export { EngineMetrics } from './metrics.js';
export { resolveOptions } from './options.js';
export { reapOrphans } from './processes/orphans.js';
export { ProcessGuard } from './processes/process-guard.js';
export { ClosedError, toSluiceError } from './protocol/errors.js';
export { OPTIONAL_DEPENDENCIES, requireOptional } from './protocol/optional-dependencies.js';
export { Registry } from './registry.js';
export { describeSandbox } from './sandbox/describe.js';
export { narrowSandbox } from './sandbox/policy.js';
export { EngineSessionLog } from './sessions/lazy-recorder.js';
export { handleSignals } from './signals.js';
