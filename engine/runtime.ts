/**
 * What an open engine runs on beyond engine.ts and its worker pool: zod
 * (through the option and wire schemas), the store, the call path, the
 * registry. Engine.open imports this module only after it has started the
 * first worker, so that the worker boots and loads its own modules on another
 * core while this thread loads these; engine.ts imports nothing else
 * statically but the pool and the watchdog's spawn (docs/architecture.md,
 * "Opening an engine").
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
export { EngineSessionLog } from './sessions/lazy-recorder.js';
export { handleSignals } from './signals.js';
