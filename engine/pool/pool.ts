/** The worker pool: piscina runs tasks; each thread hands the engine one port carrying every call's messages, tagged by call id. */

import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import type { MessagePort } from 'node:worker_threads';
import type { Piscina as PiscinaPool } from 'piscina';
import type { ResolvedOptions } from '../options.js';
import { killProcessGroup } from '../processes/process-group.js';
import { DECLINED_TASK_MESSAGE, NUDGE_EXPORT, RETIRE_EXIT_CODE } from '../protocol/limits.js';
import type { EngineMessage, Task, ToolIsolation, WorkerMessage } from '../protocol/messages.js';
import { PORT_HANDSHAKE } from '../protocol/port.js';
import { Admission } from './admission.js';
import { workerEntry } from './dist-paths.js';

/** Required as CommonJS: its ESM wrapper loads later, and Engine.open can start the first worker only once it has (docs/benchmarks.md, "Cold start"). */
const { Piscina } = createRequire(import.meta.url)('piscina') as typeof import('piscina');

/** piscina's balancer hook (its type is not exported from the package root). */
type PiscinaLoadBalancer = NonNullable<ConstructorParameters<typeof PiscinaPool>[0]>['loadBalancer'] & {};

/** Receives the messages of one call. */
export interface CallSink {
  onMessage(m: WorkerMessage, port: MessagePort): void;
}

/** Options of {@link WorkerPool}. */
export interface PoolOptions {
  /** Calls that may run at once, over both kinds of thread; more wait in the pool's queue. */
  concurrency: number;
  /** Most threads carrying shared calls (tools declared `isolation: 'shared'`, the default). */
  threads: number;
  /** Most calls one shared thread carries at once. */
  callsPerThread: number;
  minThreads: number;
  /** Heap limit of each worker in MiB (a tool exhausting it fails the calls on its thread). */
  maxOldGenerationSizeMb: number;
  /** Milliseconds an idle thread is kept. */
  idleTimeout: number;
  /** Tool modules each shared thread imports as it starts, before its first task arrives (workers/entry.ts). */
  preload?: readonly string[];
}

/** Most calls an engine may run at once (the `concurrency` option's upper bound). */
export const MAX_CONCURRENCY = 1024;
/** Most calls one shared thread may carry (the `callsPerThread` option's upper bound). */
export const MAX_CALLS_PER_THREAD = 1024;
/** Calls one shared thread carries when `callsPerThread` is not set, unless `concurrency` needs more. */
export const DEFAULT_CALLS_PER_THREAD = 256;
/** Most threads (the `threads` option's upper bound). */
export const MAX_THREADS = 256;
/** Smallest worker heap limit in MiB (the `workerHeapMb` option's lower bound). */
export const MIN_WORKER_HEAP_MB = 16;
/** Least time a shared thread has to answer an abandon before it is deemed blocked and terminated. */
export const MIN_ABANDON_ANSWER_MS = 5000;
/** Times a call is handed to another thread because the one it was given retired before starting it. */
const MAX_RETIRED_RETRIES = 8;

/**
 * The `callsPerThread` default: enough for `threads` threads to carry
 * `concurrency` calls, so an engine asked for N calls runs N (MAX_CONCURRENCY
 * never exceeds MAX_CALLS_PER_THREAD, so one thread can always carry them).
 */
export function defaultCallsPerThread(concurrency: number, threads: number): number {
  return Math.min(MAX_CALLS_PER_THREAD, Math.max(DEFAULT_CALLS_PER_THREAD, Math.ceil(concurrency / threads)));
}

/** Default options. */
export function defaultPoolOptions(): PoolOptions {
  const cores = availableParallelism();
  const concurrency = Math.max(16, cores * 2);
  // One core is left to the main thread, which captures every call's output (docs/benchmarks.md, "Small calls and spawning").
  const threads = Math.max(1, cores - 1);
  return {
    concurrency,
    threads,
    callsPerThread: defaultCallsPerThread(concurrency, threads),
    minThreads: 1,
    maxOldGenerationSizeMb: 512,
    idleTimeout: 30_000,
  };
}

/** The engine settings that shape the pool. */
export interface PoolSettings {
  concurrency?: unknown;
  threads?: unknown;
  callsPerThread?: unknown;
  minThreads?: unknown;
  workerHeapMb?: unknown;
}

/** Pool options from unvalidated settings when plainly valid, so Engine.open starts the first worker before loading the schema. */
export function earlyPoolOptions(s: PoolSettings): PoolOptions | undefined {
  const d = defaultPoolOptions();
  const int = (v: unknown, min: number, max: number, fallback: number): number | undefined => {
    if (v === undefined) return fallback;
    return Number.isSafeInteger(v) && (v as number) >= min && (v as number) <= max ? (v as number) : undefined;
  };
  // 0 stands for unset: poolWidth derives each from the other.
  const concurrency = int(s.concurrency, 1, MAX_CONCURRENCY, 0);
  const threads = int(s.threads, 1, MAX_THREADS, d.threads);
  const callsPerThread = int(s.callsPerThread, 1, MAX_CALLS_PER_THREAD, 0);
  const minThreads = int(s.minThreads, 0, Number.MAX_SAFE_INTEGER, d.minThreads);
  const heap = int(s.workerHeapMb, MIN_WORKER_HEAP_MB, Number.MAX_SAFE_INTEGER, d.maxOldGenerationSizeMb);
  if (
    concurrency === undefined ||
    threads === undefined ||
    callsPerThread === undefined ||
    minThreads === undefined ||
    heap === undefined
  ) {
    return undefined;
  }
  const width = poolWidth(
    { concurrency: concurrency || undefined, threads, callsPerThread: callsPerThread || undefined },
    d.concurrency,
  );
  if (!width.fits) return undefined;
  return {
    concurrency: width.concurrency,
    threads,
    callsPerThread: width.callsPerThread,
    minThreads,
    maxOldGenerationSizeMb: heap,
    idleTimeout: d.idleTimeout,
  };
}

/** How many calls run at once and per thread, from the settings given (validated) and the default concurrency. */
export interface PoolWidth {
  concurrency: number;
  callsPerThread: number;
  /** False when `threads` × `callsPerThread`, both given, cannot carry the `concurrency` given. */
  fits: boolean;
}

/**
 * Resolves `concurrency` and `callsPerThread` together, so that the threads
 * always carry the calls admitted: an unset `callsPerThread` grows to carry
 * `concurrency` ({@link defaultCallsPerThread}); an unset `concurrency`
 * shrinks to what `threads` × `callsPerThread` carry; both set and too
 * narrow is not `fits` (Engine.open refuses it with EBADOPTION).
 */
export function poolWidth(
  given: { concurrency: number | undefined; threads: number; callsPerThread: number | undefined },
  defaultConcurrency: number,
): PoolWidth {
  const { threads } = given;
  const callsPerThread =
    given.callsPerThread ?? defaultCallsPerThread(given.concurrency ?? defaultConcurrency, threads);
  const concurrency = given.concurrency ?? Math.min(defaultConcurrency, threads * callsPerThread);
  return { concurrency, callsPerThread, fits: concurrency <= threads * callsPerThread };
}

/** Options of {@link WorkerPool.run}. */
export interface RunOptions {
  /** Withdraws a call still waiting for a slot; for an isolated call, also terminates its thread. */
  signal?: AbortSignal;
  callId?: string;
  sink?: CallSink;
  /** The tool's isolation: `'thread'` runs the call on a thread of its own. @default 'shared' */
  isolation?: ToolIsolation;
}

/** What the pool is doing, for metrics. */
export interface PoolStats {
  threads: number;
  busyThreads: number;
  /** Calls holding a slot (running, or handed to a thread that is starting). */
  running: number;
  queued: number;
}

/** The piscina pools (shared and isolated threads) plus the per-worker ports. */
export class WorkerPool {
  /** The pool of shared threads (also runs describe tasks). */
  readonly piscina: PiscinaPool;
  readonly options: PoolOptions;
  private isolated: PiscinaPool | undefined;
  private readonly admission: Admission;
  private readonly sinks = new Map<string, CallSink>();
  /** Calls whose worker has posted a message: they started, so they are never run again. */
  private readonly heard = new Set<string>();
  /** The thread each started call runs on (by its first message), for the busy-thread count. */
  private readonly callThreads = new Map<string, MessagePort>();
  private readonly ports = new Map<number, MessagePort>();
  private readonly portThreads = new Map<MessagePort, number>();
  private closed = false;
  private readonly unsettled = new Set<string>();
  private readonly abandonTimers = new Set<NodeJS.Timeout>();
  /** Threads told to abandon a call, or that declined a task (workers/entry.ts): handed no more until they exit. */
  private readonly retiring = new Set<number>();

  constructor(opts: PoolOptions) {
    this.options = { ...opts };
    this.admission = new Admission(opts.concurrency);
    // A thread takes at most concurrency / threads calls while another may still be started.
    const spread = Math.min(opts.callsPerThread, Math.ceil(opts.concurrency / opts.threads));
    this.piscina = this.makePiscina({
      minThreads: Math.min(opts.minThreads, opts.threads),
      maxThreads: opts.threads,
      concurrentTasksPerWorker: opts.callsPerThread,
      loadBalancer: spreadBalancer(spread, opts.callsPerThread, opts.threads, this.retiring),
      ...(opts.preload?.length ? { workerData: { preload: [...opts.preload] } } : {}),
    });
  }

  private makePiscina(shape: {
    minThreads: number;
    maxThreads: number;
    concurrentTasksPerWorker: number;
    loadBalancer?: PiscinaLoadBalancer;
    workerData?: { preload: string[] };
  }): PiscinaPool {
    const p = new Piscina({
      filename: workerEntry(),
      ...shape,
      maxQueue: Number.POSITIVE_INFINITY,
      idleTimeout: this.options.idleTimeout,
      // An idle worker blocking in Atomics.wait would freeze the event loop a shared thread's other calls run on.
      atomics: shape.concurrentTasksPerWorker > 1 ? 'disabled' : 'sync',
      // Workers allocate and drop many pipe-read buffers; V8's default nursery grows large per thread.
      resourceLimits: { maxOldGenerationSizeMb: this.options.maxOldGenerationSizeMb, maxYoungGenerationSizeMb: 4 },
      // The worker must see process.env changes made by the host (PATH, HOME).
      env: process.env,
    });
    p.on('message', (m: unknown) => this.onWorkerMessage(m));
    // piscina starts a thread only for a new task or below minThreads: a call queued because every
    // thread was retiring would wait forever once they have exited (minThreads 0, or all retiring).
    p.on('workerDestroy', (w: { id: number }) => {
      // Kept until piscina drops the thread, not its port: a thread whose port closed may still be handed tasks.
      this.retiring.delete(w.id);
      setImmediate(() => this.redispatch(p));
    });
    // piscina emits 'error' for worker errors outside any task; they are reported per call instead.
    p.on('error', () => {});
    return p;
  }

  /**
   * Makes `p` start a thread for the tasks it holds queued when it has room:
   * a no-op task (workers/entry.ts `nudge`) queued behind them, which
   * piscina answers by starting a thread that takes the queue in order.
   */
  private redispatch(p: PiscinaPool): void {
    if (this.closed || p.queueSize === 0 || p.threads.length >= p.maxThreads) return;
    p.run(null, { name: NUDGE_EXPORT }).catch(() => {});
  }

  private isolatedPool(): PiscinaPool {
    this.isolated ??= this.makePiscina({
      minThreads: 0,
      maxThreads: Math.min(this.options.concurrency, ISOLATED_THREADS),
      // One call per thread: a tool that spins, crashes or exhausts its heap takes only its own call down.
      concurrentTasksPerWorker: 1,
      loadBalancer: spreadBalancer(1, 1, Math.min(this.options.concurrency, ISOLATED_THREADS), this.retiring),
    });
    return this.isolated;
  }

  private onWorkerMessage(m: unknown): void {
    if (!m || typeof m !== 'object' || !(PORT_HANDSHAKE in m)) return;
    const port = (m as { port?: MessagePort }).port ?? Object.values(m).find(isPort);
    if (!port) return;
    const threadId = (m as { threadId?: unknown }).threadId;
    if (typeof threadId === 'number') {
      this.ports.set(threadId, port);
      this.portThreads.set(port, threadId);
    }
    port.on('message', (msg: WorkerMessage) => {
      const sink = this.sinks.get(msg.c);
      if (sink) {
        if (!this.heard.has(msg.c)) {
          this.heard.add(msg.c);
          this.callThreads.set(msg.c, port);
        }
        sink.onMessage(msg, port);
        return;
      }
      // A late message of an ended call is dropped, except a process group: nothing may outlive a call.
      if (msg?.t === 'proc') killProcessGroup(msg.pid);
    });
    port.on('close', () => {
      const id = this.portThreads.get(port);
      if (id !== undefined) this.ports.delete(id);
      this.portThreads.delete(port);
    });
    port.unref();
  }

  /** Runs a task once the concurrency bound admits it, routing `callId`'s messages to `sink`; a thread that retires before starting it hands it on. */
  async run(task: Task, options: RunOptions = {}): Promise<unknown> {
    const { callId, sink, signal } = options;
    if (callId && sink) this.sinks.set(callId, sink);
    if (task.kind === 'describe') return this.retrying(this.piscina, task, undefined);
    const release = await this.admission.acquire(signal);
    if (callId) this.unsettled.add(callId);
    try {
      if (options.isolation === 'thread') return await this.retrying(this.isolatedPool(), task, callId, signal);
      return await this.retrying(this.piscina, task, callId);
    } finally {
      if (callId) this.unsettled.delete(callId);
      release();
    }
  }

  /**
   * Lets go of a shared call that did not stop when asked: its worker retires
   * the thread once idle. A task still unsettled after max(`graceMs`,
   * {@link MIN_ABANDON_ANSWER_MS}) means a blocked event loop: the thread is terminated.
   */
  abandon(callId: string, port: MessagePort, graceMs: number): void {
    port.postMessage({ t: 'abandon', c: callId } satisfies EngineMessage);
    // The thread retires (or is terminated): a call handed to it now would only wait for that, or die with it.
    const id = this.portThreads.get(port);
    if (id !== undefined) this.retiring.add(id);
    // A busy thread on a loaded machine can take a while to answer: terminating it too early fails its thread-mates.
    const timer = setTimeout(
      () => {
        this.abandonTimers.delete(timer);
        if (this.unsettled.has(callId)) void this.terminate(port);
      },
      Math.max(graceMs, MIN_ABANDON_ANSWER_MS),
    );
    this.abandonTimers.add(timer);
  }

  private async retrying(pool: PiscinaPool, task: Task, callId: string | undefined, signal?: AbortSignal) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await pool.run(task, signal ? { signal } : {});
      } catch (err) {
        const declinedBy = declinedThread(err);
        // A thread whose port has closed is exiting: piscina may have dropped it already, and its id would stay.
        if (declinedBy !== undefined && this.ports.has(declinedBy)) this.retiring.add(declinedBy);
        // A detached call is never run again, whatever its task's fate.
        const unstarted = callId === undefined || (this.sinks.has(callId) && !this.heard.has(callId));
        const handBack = isRetirement(err) || declinedBy !== undefined;
        if (!this.closed && unstarted && attempt < MAX_RETIRED_RETRIES && handBack) continue;
        throw err;
      }
    }
  }

  detach(callId: string): void {
    this.sinks.delete(callId);
    this.heard.delete(callId);
    this.callThreads.delete(callId);
  }

  send(port: MessagePort, m: EngineMessage): void {
    port.postMessage(m);
  }

  /** Terminates the thread owning `port`, failing every call it carries: the last resort for a shared thread that no longer answers. */
  async terminate(port: MessagePort): Promise<void> {
    const id = this.portThreads.get(port);
    if (id === undefined) return;
    const worker = this.piscina.threads.find((w) => w.threadId === id);
    await worker?.terminate();
  }

  get threads(): number {
    return this.piscina.threads.length + (this.isolated?.threads.length ?? 0);
  }

  stats(): PoolStats {
    return {
      threads: this.threads,
      busyThreads: new Set(this.callThreads.values()).size,
      running: this.admission.active,
      queued: this.admission.queued,
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.abandonTimers) clearTimeout(t);
    this.admission.rejectAll(new Error('the worker pool is closed'));
    for (const p of this.ports.values()) p.close();
    await Promise.all([this.piscina.destroy(), this.isolated?.destroy()]);
  }
}

/** Threads an isolated pool may start: one per isolated call running. */
const ISOLATED_THREADS = Math.max(16, availableParallelism() * 2);

/**
 * piscina's least-busy choice among threads not `retiring`, softly capped at
 * `spread` calls while a thread can still be started (null makes piscina
 * start one, or keep the task queued until a thread is free).
 */
function spreadBalancer(
  spread: number,
  max: number,
  threads: number,
  retiring: ReadonlySet<number>,
): PiscinaLoadBalancer {
  return (_task, workers) => {
    let best: (typeof workers)[number] | null = null;
    for (const w of workers) {
      if (w.currentUsage >= max || retiring.has(w.id)) continue;
      if (!best || w.currentUsage < best.currentUsage) best = w;
    }
    if (best && best.currentUsage >= spread && workers.length < threads) return null;
    return best;
  };
}

/** The thread that declined a task (it never started it), from the error the task was rejected with. */
function declinedThread(err: unknown): number | undefined {
  if (!(err instanceof Error) || !err.message.startsWith(DECLINED_TASK_MESSAGE)) return undefined;
  const id = Number(err.message.slice(DECLINED_TASK_MESSAGE.length));
  return Number.isSafeInteger(id) ? id : undefined;
}

/** True for a worker exit with the retirement code (the thread started none of the tasks it held). */
function isRetirement(err: unknown): boolean {
  return err instanceof Error && err.message === `worker exited with code: ${RETIRE_EXIT_CODE}`;
}

function isPort(v: unknown): v is MessagePort {
  return typeof v === 'object' && v !== null && typeof (v as MessagePort).postMessage === 'function';
}

/** The pool options of resolved settings. */
export function poolOptionsOf(o: ResolvedOptions): PoolOptions {
  return {
    concurrency: o.concurrency,
    threads: o.threads,
    callsPerThread: o.callsPerThread,
    minThreads: o.minThreads,
    maxOldGenerationSizeMb: o.workerHeapMb,
    idleTimeout: defaultPoolOptions().idleTimeout,
  };
}

/** True when two pool settings would build the same pool. */
export function samePoolOptions(a: PoolOptions, b: PoolOptions): boolean {
  return (
    a.concurrency === b.concurrency &&
    a.threads === b.threads &&
    a.callsPerThread === b.callsPerThread &&
    a.minThreads === b.minThreads &&
    a.maxOldGenerationSizeMb === b.maxOldGenerationSizeMb &&
    a.idleTimeout === b.idleTimeout
  );
}
