/**
 * The engine: one store, one worker pool, a registry of tools, and the calls
 * running on them. This is the library's entry point.
 */
import { resolve } from 'node:path';
import { resolveStoreDir, Store } from '../store/store.js';
import { type ApprovalPolicy, Call, type CallOptions, type CallRecorder } from './call.js';
import { EventHub } from './events/hub.js';
import { type EngineOptions, type ResolvedOptions, resolveOptions } from './options.js';
import { builtinTool } from './paths.js';
import { defaultPoolOptions, WorkerPool } from './pool.js';
import { ClosedError, toSluiceError } from './protocol/errors.js';
import { Registry, type ToolInfo } from './registry.js';
import type { CallEvent, TerminalResult } from './result.js';

/** Options of {@link Engine.open} beyond the plain settings. */
export interface EngineOpenOptions extends EngineOptions {
  /** Decides prepared operations (file reads, process spawns, ...). @default allow everything except file reads outside `cwd` */
  approve?: ApprovalPolicy;
  /** Receives call records (the session log). */
  recorder?: CallRecorder;
  /** Register the built-in tools (bash, read). @default true */
  builtins?: boolean;
}

/** A handle on a running call. */
export interface CallHandle {
  readonly callId: string;
  /** Settles with the terminal result (never rejects for tool-level failures). */
  readonly result: Promise<TerminalResult>;
  /** Live events of this call: started, display deltas, completed (a lagging subscriber gets `lagged` then completed). */
  events(): AsyncIterableIterator<CallEvent | { type: 'lagged'; dropped: number }>;
  /** Asks the call to stop. */
  cancel(reason?: string): void;
  /** The bounded live display so far. */
  readonly liveDisplay: string;
  /** Peak bytes in flight between worker and disk (never above the window). */
  readonly maxInFlight: number;
}

/** The sluice engine. */
export class Engine {
  /** The artifact store. */
  readonly store: Store;
  /** Resolved settings. */
  readonly options: ResolvedOptions;
  private readonly pool: WorkerPool;
  private readonly registry = new Registry();
  private readonly calls = new Map<string, Call>();
  private readonly hub: EventHub<CallEvent>;
  private readonly approve: ApprovalPolicy;
  private readonly recorder: CallRecorder | undefined;
  private closed = false;

  private constructor(store: Store, options: ResolvedOptions, init: EngineOpenOptions) {
    this.store = store;
    this.options = options;
    this.pool = new WorkerPool({
      concurrency: options.concurrency,
      minThreads: options.minThreads,
      maxOldGenerationSizeMb: options.workerHeapMb,
      idleTimeout: 30_000,
    });
    this.hub = new EventHub<CallEvent>({ queueLimit: options.subscriberQueue });
    this.approve = init.approve ?? defaultApproval(options.cwd);
    this.recorder = init.recorder;
  }

  /** Opens an engine on a store (created when missing). */
  static async open(init: EngineOpenOptions = {}): Promise<Engine> {
    const { approve: _a, recorder: _r, builtins: _b, ...settings } = init;
    const options = resolveOptions(settings, {
      concurrency: defaultPoolOptions().concurrency,
      cwd: process.cwd(),
    });
    const store = await Store.open(resolveStoreDir(init.store));
    const engine = new Engine(store, options, init);
    if (init.builtins !== false) {
      try {
        await engine.registerModule(builtinTool('bash'), 'builtin');
      } catch (err) {
        await engine.close();
        throw err;
      }
    }
    return engine;
  }

  /**
   * Registers a tool module (a path or URL whose default export is a
   * `defineTool` result). The module is loaded in a worker only; a module that
   * fails to import, declares invalid streams or exports no tool is rejected
   * with EBADMODULE or EBADDECL naming it.
   */
  register(module: string): Promise<ToolInfo> {
    const spec = /^[a-z][a-z0-9+.-]*:/i.test(module) ? module : resolve(module);
    return this.registerModule(spec, 'plugin');
  }

  /** @internal */
  registerModule(module: string, source: ToolInfo['source']): Promise<ToolInfo> {
    this.assertOpen();
    return this.registry.register(this.pool, module, source);
  }

  /** Registered tools. */
  tools(): ToolInfo[] {
    return this.registry.list();
  }

  /** Starts a call. Unknown tools fail synchronously with EUNKNOWNTOOL. */
  call(tool: string, args: unknown, options: CallOptions = {}): CallHandle {
    this.assertOpen();
    const info = this.registry.get(tool);
    const call = new Call(
      {
        pool: this.pool,
        store: this.store,
        settings: this.options,
        approve: this.approve,
        ...(this.recorder ? { recorder: this.recorder } : {}),
        engineHub: this.hub,
        onSettled: (c) => this.calls.delete(c.callId),
      },
      info,
      args,
      options,
    );
    this.calls.set(call.callId, call);
    void call.start();
    return {
      callId: call.callId,
      result: call.result,
      events: () => call.hub.subscribe(),
      cancel: (reason?: string) => call.cancel(reason),
      get liveDisplay() {
        return call.liveDisplay;
      },
      get maxInFlight() {
        return call.maxInFlight;
      },
    };
  }

  /** Runs a call to its end. */
  run(tool: string, args: unknown, options: CallOptions = {}): Promise<TerminalResult> {
    return this.call(tool, args, options).result;
  }

  /** Live events of every call. */
  events(): AsyncIterableIterator<CallEvent | { type: 'lagged'; dropped: number }> {
    return this.hub.subscribe();
  }

  /** A running call by id. */
  running(callId: string): CallHandle | undefined {
    const call = this.calls.get(callId);
    if (!call) return undefined;
    return {
      callId,
      result: call.result,
      events: () => call.hub.subscribe(),
      cancel: (reason?: string) => call.cancel(reason),
      liveDisplay: call.liveDisplay,
      maxInFlight: call.maxInFlight,
    };
  }

  /** Number of live worker threads. */
  get threads(): number {
    return this.pool.threads;
  }

  /** Cancels running calls, waits for their terminal results, and stops the workers. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const pending = [...this.calls.values()];
    for (const c of pending) c.cancel('the engine is closing');
    await Promise.all(pending.map((c) => c.result));
    await this.pool.close().catch((err) => {
      throw toSluiceError(err);
    });
    this.store.close();
  }

  private assertOpen(): void {
    if (this.closed) throw new ClosedError('the engine is closed');
  }
}

/**
 * The default approval policy: everything is allowed except filesystem reads
 * outside the working root (the read tool checks real paths, so symlinks out
 * of the root are refused too).
 */
export function defaultApproval(root: string): ApprovalPolicy {
  const base = resolve(root);
  return (op) => {
    if (op.kind !== 'fs.read') return true;
    const path = typeof op.realPath === 'string' ? op.realPath : typeof op.path === 'string' ? op.path : '';
    const p = resolve(path);
    return p === base || p.startsWith(base.endsWith('/') ? base : `${base}/`);
  };
}
