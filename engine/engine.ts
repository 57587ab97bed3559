import { resolve } from 'node:path';
import type { StoreIO } from '../store/io.js';
import type { Store } from '../store/store.js';
import type { BatchOptions, BatchResult } from './batch/batch.js';
import { BUILTIN_NAMES, builtinTool } from './builtins/names.js';
import type { Call } from './call/call.js';
import type { ApprovalPolicy, CallHandle, CallOptions, CallRecorder, InternalCallOptions } from './call/call-types.js';
import type { RunningCalls } from './call/running-calls.js';

export type { CallHandle } from './call/call-types.js';
export { defaultApproval } from './call/default-approval.js';

import { defaultApproval } from './call/default-approval.js';
import type { ReadBytesResult, ReadOptions, ReadResult } from './engine-read.js';
import type { SearchOptions, SearchResult } from './engine-search.js';
import type { EventHub } from './events/hub.js';
import type { McpServerConfig } from './mcp/config.js';
import type { McpServers } from './mcp/servers.js';
import type { EngineMetrics, MetricsSnapshot } from './metrics.js';
import type { EngineOptions, ResolvedOptions } from './options.js';
import { assertSupportedPlatform } from './platform.js';
import {
  defaultPoolOptions,
  earlyPoolOptions,
  type PoolStats,
  poolOptionsOf,
  samePoolOptions,
  WorkerPool,
} from './pool/pool.js';
import type { ProcessGuard } from './processes/process-guard.js';
import { assertSpawnSettings } from './processes/spawn-settings.js';
import { startWatchdog, type Watchdog } from './processes/watchdog.js';
import type { Registry, ToolInfo } from './registry.js';
import type { CallEvent, TerminalResult } from './result.js';
import type {
  GcOptions,
  GcReport,
  ReplayedSession,
  RevertResult,
  SessionReplay,
  SessionSummary,
  SessionVerifyReport,
} from './sessions/index.js';
import type { EngineSessionLog } from './sessions/lazy-recorder.js';
import type { SignalOptions } from './signals.js';

/** The modules Engine.open loads once the first worker has started (engine/runtime.ts). */
type Runtime = typeof import('./runtime.js');

/** Sessions, replay, revert, GC and verify: loaded on first use. */
const sessionsModule = () => import('./sessions/index.js');

/** Options of {@link Engine.open} beyond the plain settings. */
export interface EngineOpenOptions extends EngineOptions {
  /** Decides prepared operations (file reads, process spawns, ...). @default allow everything except file reads outside `cwd` */
  approve?: ApprovalPolicy;
  /**
   * Receives call records. @default the session event log of the store
   * (`sessions/<id>/events.log`), for calls that have a `session` option;
   * calls without one are not recorded.
   */
  recorder?: CallRecorder;
  /** Register the built-in tools (bash, read). @default true */
  builtins?: boolean;
  /** Filesystem calls of the store; tests inject faults (ENOSPC, EIO) here. @default the real filesystem */
  io?: StoreIO;
}

/** The sluice engine. */
export class Engine {
  /** The artifact store. */
  readonly store: Store;
  /** Resolved settings. */
  readonly options: ResolvedOptions;
  private readonly pool: WorkerPool;
  private readonly registry: Registry;
  private mcp: McpServers | undefined;
  /** Loads the MCP adapter (on the first {@link addMcpServer}) and resolves to {@link mcp}. */
  private mcpLoad: Promise<McpServers> | undefined;
  private readonly calls: RunningCalls;
  private readonly hub: EventHub<CallEvent>;
  private readonly approve: ApprovalPolicy;
  private readonly recorder: CallRecorder | undefined;
  private readonly sessionLog: EngineSessionLog;
  private readonly processes: ProcessGuard;
  private unhandleSignals: (() => void) | undefined;
  private readonly runtime: Runtime;
  private readonly counters: EngineMetrics;
  private closed = false;

  private constructor(
    runtime: Runtime,
    store: Store,
    pool: WorkerPool,
    options: ResolvedOptions,
    init: EngineOpenOptions,
    watchdog: Watchdog | undefined,
  ) {
    this.runtime = runtime;
    this.store = store;
    this.pool = pool;
    this.options = options;
    this.registry = new runtime.Registry();
    this.hub = new runtime.EventHub<CallEvent>({ queueLimit: options.subscriberQueue });
    this.approve = init.approve ?? defaultApproval(options.cwd);
    this.sessionLog = new runtime.EngineSessionLog(store);
    this.recorder = init.recorder ?? this.sessionLog;
    this.processes = new runtime.ProcessGuard(store.layout.procs, watchdog);
    this.counters = new runtime.EngineMetrics();
    this.calls = new runtime.RunningCalls(
      {
        pool,
        processes: this.processes,
        store,
        settings: options,
        approve: this.approve,
        ...(this.recorder ? { recorder: this.recorder } : {}),
        engineHub: this.hub,
        // An MCP call's end releases what the MCP host thread holds for it (its spill files).
        onEnded: (callId, tool) => {
          if (tool.source === 'mcp') this.mcp?.callEnded(callId);
        },
      },
      this.counters,
    );
  }

  /**
   * The engine's counters and the pool's state, for `GET /v1/metrics`
   * (server/metrics.ts renders them). @internal
   */
  metricsSnapshot(): { counters: Readonly<MetricsSnapshot>; pool: PoolStats } {
    return { counters: this.counters.snapshot(), pool: this.pool.stats() };
  }

  /** Opens an engine on a store (created when missing). EUNSUPPORTED on a platform other than Linux (see README, "Requirements"). */
  static async open(init: EngineOpenOptions = {}): Promise<Engine> {
    const { approve: _a, recorder: _r, builtins: _b, io, ...settings } = init;
    assertSupportedPlatform();
    assertSpawnSettings();
    // The watchdog first: a fork costs in proportion to this process's memory and stalls this
    // thread until the child has exec'd, so it is cheapest before any worker thread exists.
    const watchdog = startWatchdog('');
    // The first worker is the slowest part of opening: it boots on another core while this thread loads the rest.
    // Shared threads import bash while their first task is on its way: most first calls are bash.
    const preload = init.builtins !== false ? { preload: [builtinTool('bash')] } : {};
    const early = earlyPoolOptions(settings);
    let pool = early ? new WorkerPool({ ...early, ...preload }) : undefined;
    let store: Store | undefined;
    try {
      const runtime = await import('./runtime.js');
      const location = runtime.resolveStoreLocation(init.store);
      const options = runtime.resolveOptions(settings, {
        concurrency: defaultPoolOptions().concurrency,
        cwd: process.cwd(),
        storeRoot: location.kind === 'directory' ? location.dir : location.localDir,
      });
      const wanted = { ...poolOptionsOf(options), ...preload };
      if (pool && !samePoolOptions(pool.options, wanted)) {
        await pool.close();
        pool = undefined;
      }
      pool ??= new WorkerPool(wanted);
      store = await runtime.Store.open(location, io ? { io } : {});
      const engine = new Engine(runtime, store, pool, options, init, watchdog);
      // From generated descriptions: the first call waits only for the worker to be up, never for a describe task.
      if (init.builtins !== false) {
        for (const name of BUILTIN_NAMES) {
          engine.registry.add(runtime.BUILTIN_TOOLS[name], builtinTool(name), 'builtin');
        }
      }
      engine.calls.guardExit();
      // Groups left running by an engine that died with its watchdog: killed without delaying the open.
      void runtime.reapOrphans(store).catch(() => {});
      return engine;
    } catch (err) {
      watchdog?.stdin.end();
      await pool?.close().catch(() => {});
      await store?.close();
      throw err;
    }
  }

  /**
   * Registers a tool module (a path or URL whose default export is a
   * `defineTool` result), loaded in a worker only. EBADMODULE or EBADDECL
   * for a module that fails to import, declares invalid streams or exports no tool.
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

  /**
   * Starts a Model Context Protocol server over stdio and registers each of
   * its tools as `<server>.<tool>` (docs/adapters.md); the server lives until
   * the engine closes. EBADOPTION for an invalid or duplicate configuration,
   * EBADMODULE when the server cannot be started or listed, EMISSINGDEP when
   * `@modelcontextprotocol/sdk` is not installed.
   */
  addMcpServer(config: McpServerConfig): Promise<ToolInfo[]> {
    this.assertOpen();
    // Fails here, typed, before a host thread starts.
    if (!this.mcpLoad) {
      try {
        this.runtime.requireOptional(this.runtime.OPTIONAL_DEPENDENCIES.mcp);
      } catch (err) {
        return Promise.reject(err);
      }
    }
    this.mcpLoad ??= import('./mcp/servers.js').then((m) => {
      this.mcp = new m.McpServers({
        cwd: this.options.cwd,
        spillDir: this.store.layout.tmp,
        register: (module, overrides) => this.registry.register(this.pool, module, 'mcp', overrides),
        tools: () => this.registry.list(),
        unregister: (name) => this.registry.unregister(name),
        sandboxOf: (spec) => this.runtime.narrowSandbox(this.options.sandbox, spec, this.options.sandboxContext),
      });
      return this.mcp;
    });
    return this.mcpLoad.then((servers) => servers.add(config));
  }

  /** Registered tools; where the engine has a sandbox, bash's description states its policy. */
  tools(): ToolInfo[] {
    const tools = this.registry.list();
    const sandbox = this.options.sandbox;
    if (!sandbox) return tools;
    // The model reads the description: it should know what the sandbox will refuse before it tries.
    const note = this.runtime.describeSandbox(sandbox);
    return tools.map((t) => (runsUnderSandbox(t) ? { ...t, description: `${t.description} ${note}` } : t));
  }

  /**
   * Starts a call. EUNKNOWNTOOL for an unknown tool, EBADARGS for an invalid
   * `session` id or arguments that are not plain JSON, both synchronously. A
   * call with a `session` is recorded in that session's event log.
   */
  call(tool: string, args: unknown, options: CallOptions = {}): CallHandle {
    return this.startCall(tool, args, options).handle;
  }

  private startCall(
    tool: string,
    args: unknown,
    options: CallOptions,
    internal: InternalCallOptions = {},
  ): { handle: CallHandle; call: Call } {
    this.assertOpen();
    const call = this.calls.start(tool, this.registry.get(tool), args, options, internal);
    return { handle: call.handle(), call };
  }

  /** Runs a call to its end. */
  run(tool: string, args: unknown, options: CallOptions = {}): Promise<TerminalResult> {
    return this.call(tool, args, options).result;
  }

  /**
   * Runs a batch of calls (`{ id, tool, args?, session? }` objects, or JSON
   * lines of them) with bounded concurrency, yielding one result per item in
   * completion order (input order with `ordered`). The input is pulled only as
   * results are consumed; an invalid item yields an error result; an id
   * already completed in its session yields its recorded result with
   * `resumed: true`. Breaking out of the loop, or aborting `signal`, stops the batch.
   */
  batch(
    calls: Iterable<unknown> | AsyncIterable<unknown>,
    options: BatchOptions = {},
  ): AsyncGenerator<BatchResult, void, undefined> {
    this.assertOpen();
    // The batch runner brings the session-index modules an open does not need.
    const load = import('./batch/batch.js');
    const engine = this;
    return (async function* () {
      yield* (await load).runBatch(engine, calls, options);
    })();
  }

  /**
   * Reads one page of a file, directory or artifact through the built-in
   * `read` tool on the ordinary call path (approval included). Throws the
   * typed error of a failed read (EBADURI, ENOTFOUND, EINTEGRITY, EDENIED, ...).
   */
  async read(filePath: string, options: ReadOptions = {}): Promise<ReadResult> {
    const { READ_TOOL, readArgs, readCallOptions, readResultOf } = this.runtime;
    return readResultOf(await this.run(READ_TOOL, readArgs(filePath, options), readCallOptions(options)));
  }

  /**
   * Searches an artifact for `pattern` like `grep -n` (lines zero-based)
   * through the built-in `grep` tool on the ordinary call path; one bounded
   * page, continue with `offset: nextOffset`. Throws the typed error of a failed search.
   */
  async search(filePath: string, pattern: string, options: SearchOptions = {}): Promise<SearchResult> {
    // The search text parser is not on a plain call's path.
    const { SEARCH_TOOL, searchArgs, searchCallOptions, searchResultOf } = await import('./engine-search.js');
    return searchResultOf(
      await this.run(SEARCH_TOOL, searchArgs(filePath, pattern, options), searchCallOptions(options)),
    );
  }

  /**
   * Like {@link read}, with the page's bytes as stored instead of their text
   * (for an artifact, invalid UTF-8 included). A file page is its numbered lines as UTF-8.
   */
  async readBytes(filePath: string, options: ReadOptions = {}): Promise<ReadBytesResult> {
    const { READ_TOOL, readArgs, readCallOptions, readResultOf } = this.runtime;
    const { call } = this.startCall(READ_TOOL, readArgs(filePath, options), readCallOptions(options), {
      keepPage: true,
    });
    const { content: _text, ...page } = readResultOf(await call.result);
    return { ...page, bytes: call.pageBytes ?? Buffer.alloc(0) };
  }

  /**
   * Rebuilds the calls of a session from its event log without running any
   * tool: each call's final display and model view as the live call returned
   * them; a call without a terminal record comes back interrupted. ENOTFOUND for an unknown session.
   */
  replay(session: string): Promise<ReplayedSession> {
    return sessionsModule().then((s) => s.replaySession(this.store, session));
  }

  /**
   * Like {@link replay}, reading each call back only when the iteration of
   * `calls()` reaches it. The log stays open until the iteration ends; call
   * `close()` on a replay you do not iterate. ENOTFOUND for an unknown session.
   */
  openReplay(session: string): Promise<SessionReplay> {
    return sessionsModule().then((s) => s.openReplay(this.store, session));
  }

  /**
   * Reverts a session to before call `beforeCallId`: that call and every later
   * one stop being replayed and being GC roots. ENOTFOUND when the call is not live in the session.
   */
  revert(session: string, beforeCallId: string): Promise<RevertResult> {
    this.assertOpen();
    return Promise.all([sessionsModule(), this.sessionLog.get()]).then(([s, log]) =>
      s.revertSession(this.store, log, session, beforeCallId),
    );
  }

  /** The sessions of the store, with counts of live, reverted and interrupted calls. */
  sessions(): Promise<SessionSummary[]> {
    return sessionsModule().then((s) => s.listSessions(this.store));
  }

  /** Collects blobs not referenced by live session records or pins and older than the grace period; safe while calls run. */
  gc(options: GcOptions = {}): Promise<GcReport> {
    return sessionsModule().then(async (s) => {
      const report = await s.collectGarbage(this.store, options);
      if (!report.dryRun) this.counters.gcRan(report.bytesFreed, report.removed);
      return report;
    });
  }

  /**
   * Hashes every blob; lists corrupt and missing blobs and live session
   * records that reference missing blobs. With `repair`, corrupt blobs are
   * moved to quarantine/ (docs/operations.md, "Verify and repair").
   */
  verify(options: { repair?: boolean } = {}): Promise<SessionVerifyReport> {
    return sessionsModule().then((s) => s.verifyWithSessions(this.store, options));
  }

  /** Live events of every call. */
  events(): AsyncIterableIterator<CallEvent | { type: 'lagged'; dropped: number }> {
    return this.hub.subscribe();
  }

  /** A running call by id. */
  running(callId: string): CallHandle | undefined {
    return this.calls.get(callId)?.handle();
  }

  /** Number of live worker threads. */
  get threads(): number {
    return this.pool.threads;
  }

  /** Kills the process groups of every running call, synchronously. @internal */
  killAllProcesses(): void {
    this.calls.killAllProcesses();
  }

  /** Cancels every running call with `reason`. @internal */
  cancelAll(reason: string): void {
    this.calls.cancelAll(reason);
  }

  /**
   * Opts in to a clean end on termination signals (default SIGTERM and
   * SIGHUP): cancel every running call, wait until their results are
   * recorded, close the engine and exit with 128 + the signal's number (a
   * second signal exits at once; `exit: false` only closes). Returns a
   * function that stops handling them; closing the engine does too.
   */
  handleSignals(options: SignalOptions = {}): () => void {
    this.assertOpen();
    this.unhandleSignals?.();
    const undo = this.runtime.handleSignals(this, options);
    this.unhandleSignals = undo;
    return () => {
      if (this.unhandleSignals === undo) this.unhandleSignals = undefined;
      undo();
    };
  }

  /** Cancels running calls, waits for their terminal results, and stops the workers. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.unhandleSignals?.();
    const pending = this.calls.list();
    for (const c of pending) c.cancel('the engine is closing');
    await Promise.all(pending.map((c) => c.result));
    this.hub.end();
    // An MCP module that failed to load has no servers to stop.
    try {
      await (await this.mcpLoad?.catch(() => undefined))?.close();
      await this.sessionLog.close();
      await this.pool.close().catch((err) => {
        throw this.runtime.toSluiceError(err);
      });
    } finally {
      // Every call has ended and killed its groups: the watchdog has nothing left to kill.
      await this.processes.close();
      await this.store.close();
      this.calls.releaseExit();
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new this.runtime.ClosedError('the engine is closed');
  }
}

/** The tools whose processes a sandbox confines: bash (MCP servers say so in their own entry's description). */
function runsUnderSandbox(tool: ToolInfo): boolean {
  return tool.source === 'builtin' && tool.name === 'bash';
}
