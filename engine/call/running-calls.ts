/** The running calls of one engine: started with its dependencies, counted, and found by id until they settle. */
import type { EngineMetrics } from '../metrics.js';
import type { ToolInfo } from '../registry.js';
import { narrowSandbox } from '../sandbox/policy.js';
import { assertSessionId } from '../sessions/session-id.js';
import { Call } from './call.js';
import type { CallDeps, CallOptions, InternalCallOptions } from './call-types.js';
import { assertJsonArgs } from './json-args.js';

/** Calls of open engines, killed at process 'exit': tool groups are detached from the terminal, so no signal reaches them. */
const guarded = new Set<RunningCalls>();
process.on('exit', () => {
  for (const calls of guarded) calls.killAllProcesses();
});

/** An engine's calls that have not settled yet. */
export class RunningCalls {
  private readonly calls = new Map<string, Call>();
  private readonly deps: CallDeps;
  private readonly counters: EngineMetrics;

  constructor(deps: Omit<CallDeps, 'onSettled' | 'metrics'>, counters: EngineMetrics) {
    this.deps = { ...deps, onSettled: (c) => this.calls.delete(c.callId), metrics: counters };
    this.counters = counters;
  }

  /** Creates and starts a call of `tool` (registered as `name`); EBADARGS for a bad session id or arguments that are not plain JSON. */
  start(name: string, tool: ToolInfo, args: unknown, options: CallOptions, internal: InternalCallOptions): Call {
    if (options.session !== undefined) assertSessionId(options.session);
    assertJsonArgs(name, args);
    const { settings } = this.deps;
    const sandbox = narrowSandbox(settings.sandbox, options.sandbox, settings.sandboxContext);
    const call = new Call(this.deps, tool, args, options, sandbox ? { ...internal, sandbox } : internal);
    this.calls.set(call.callId, call);
    this.counters.callStarted(tool.name);
    void call.result.then((r) => this.counters.callEnded(r));
    void call.start();
    return call;
  }

  get(callId: string): Call | undefined {
    return this.calls.get(callId);
  }

  list(): Call[] {
    return [...this.calls.values()];
  }

  /** From now until {@link releaseExit}, the process 'exit' hook kills these calls' process groups. */
  guardExit(): void {
    guarded.add(this);
  }

  /** Ends {@link guardExit}: the engine is closed. */
  releaseExit(): void {
    guarded.delete(this);
  }

  /** Kills the process groups of every running call, synchronously. */
  killAllProcesses(): void {
    for (const c of this.calls.values()) c.killProcessGroups();
  }

  cancelAll(reason: string): void {
    for (const c of this.calls.values()) c.cancel(reason);
  }
}
