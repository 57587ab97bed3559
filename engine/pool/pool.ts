/**
 * The worker pool: piscina runs tasks; each worker thread hands the engine one
 * MessagePort at startup (through piscina's message event) that carries every
 * call's data and control messages, tagged by call id.
 */

import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import type { MessagePort } from 'node:worker_threads';
import type { Piscina as PiscinaPool } from 'piscina';
import type { ResolvedOptions } from '../options.js';
import { killProcessGroup } from '../processes/process-group.js';
import type { EngineMessage, Task, WorkerMessage } from '../protocol/messages.js';
import { PORT_HANDSHAKE } from '../protocol/port.js';
import { workerEntry } from './dist-paths.js';

/**
 * piscina is CommonJS: required directly, it loads ~10 ms sooner in a cold
 * process than through its ESM wrapper (which has Node lex the module for
 * its exports), and Engine.open can start the first worker only once it has.
 */
const { Piscina } = createRequire(import.meta.url)('piscina') as typeof import('piscina');

/** Receives the messages of one call. */
export interface CallSink {
  /** Called for every message of the call, with the port it came on. */
  onMessage(m: WorkerMessage, port: MessagePort): void;
}

/** Options of {@link WorkerPool}. */
export interface PoolOptions {
  /** Calls that may run at once (one thread each). */
  concurrency: number;
  /** Threads kept warm. */
  minThreads: number;
  /** Heap limit of each worker in MiB (a tool exhausting it fails its own call only). */
  maxOldGenerationSizeMb: number;
  /** Milliseconds an idle thread is kept. */
  idleTimeout: number;
}

/** Most calls an engine may run at once (the `concurrency` option's upper bound). */
export const MAX_CONCURRENCY = 1024;
/** Smallest worker heap limit in MiB (the `workerHeapMb` option's lower bound). */
export const MIN_WORKER_HEAP_MB = 16;

/** Default options. */
export function defaultPoolOptions(): PoolOptions {
  return {
    concurrency: Math.max(16, availableParallelism() * 2),
    minThreads: 1,
    maxOldGenerationSizeMb: 512,
    idleTimeout: 30_000,
  };
}

/** The engine settings that shape the pool. */
export interface PoolSettings {
  concurrency?: unknown;
  minThreads?: unknown;
  workerHeapMb?: unknown;
}

/**
 * Pool options from engine settings that have not been validated yet, when
 * the pool's own settings are plainly valid (absent, or integers within the
 * bounds the option schema enforces); undefined otherwise. Engine.open uses
 * it to start the first worker before it loads the option schema (zod), so
 * the worker boots while the main thread loads the rest; the full validation
 * still runs, and settings it rejects close this pool.
 */
export function earlyPoolOptions(s: PoolSettings): PoolOptions | undefined {
  const d = defaultPoolOptions();
  const int = (v: unknown, min: number, max: number, fallback: number): number | undefined => {
    if (v === undefined) return fallback;
    return Number.isSafeInteger(v) && (v as number) >= min && (v as number) <= max ? (v as number) : undefined;
  };
  const concurrency = int(s.concurrency, 1, MAX_CONCURRENCY, d.concurrency);
  const minThreads = int(s.minThreads, 0, Number.MAX_SAFE_INTEGER, d.minThreads);
  const heap = int(s.workerHeapMb, MIN_WORKER_HEAP_MB, Number.MAX_SAFE_INTEGER, d.maxOldGenerationSizeMb);
  if (concurrency === undefined || minThreads === undefined || heap === undefined) return undefined;
  return { concurrency, minThreads, maxOldGenerationSizeMb: heap, idleTimeout: d.idleTimeout };
}

/** piscina plus the per-worker ports. */
export class WorkerPool {
  readonly piscina: PiscinaPool;
  /** The options the pool was started with. */
  readonly options: PoolOptions;
  private readonly sinks = new Map<string, CallSink>();
  private readonly ports = new Set<MessagePort>();

  constructor(opts: PoolOptions) {
    this.options = { ...opts };
    this.piscina = new Piscina({
      filename: workerEntry(),
      minThreads: Math.min(opts.minThreads, opts.concurrency),
      maxThreads: opts.concurrency,
      // One call per thread: a tool that spins, crashes or exhausts its heap takes only its own call down.
      concurrentTasksPerWorker: 1,
      // Calls beyond the limit wait their turn instead of failing.
      maxQueue: Number.POSITIVE_INFINITY,
      idleTimeout: opts.idleTimeout,
      // A small young generation: a worker moving output allocates and drops many pipe-read buffers,
      // and with V8's default each of 16 threads grows tens of MiB of nursery (bench/concurrency.ts).
      resourceLimits: { maxOldGenerationSizeMb: opts.maxOldGenerationSizeMb, maxYoungGenerationSizeMb: 4 },
      // The worker must see process.env changes made by the host (PATH, HOME).
      env: process.env,
    });
    this.piscina.on('message', (m: unknown) => this.onWorkerMessage(m));
    // piscina emits 'error' for worker errors outside any task; they are reported per call instead.
    this.piscina.on('error', () => {});
  }

  private onWorkerMessage(m: unknown): void {
    if (!m || typeof m !== 'object' || !(PORT_HANDSHAKE in m)) return;
    const port = (m as { port?: MessagePort }).port ?? Object.values(m).find(isPort);
    if (!port) return;
    this.ports.add(port);
    port.on('message', (msg: WorkerMessage) => {
      const sink = this.sinks.get(msg.c);
      if (sink) {
        sink.onMessage(msg, port);
        return;
      }
      // Messages for a call that already ended (late chunks after a crash or cancel) are dropped on purpose,
      // except a process group reported too late to be killed with its call: nothing may outlive a call.
      if (msg?.t === 'proc') killProcessGroup(msg.pid);
    });
    port.on('close', () => this.ports.delete(port));
    port.unref();
  }

  /** Runs a task; messages of `callId` go to `sink` until {@link detach}. */
  run(task: Task, options: { signal?: AbortSignal; callId?: string; sink?: CallSink } = {}): Promise<unknown> {
    if (options.callId && options.sink) this.sinks.set(options.callId, options.sink);
    return this.piscina.run(task, options.signal ? { signal: options.signal } : {});
  }

  /** Stops routing messages of `callId`. */
  detach(callId: string): void {
    this.sinks.delete(callId);
  }

  /** Sends a message to the worker owning `port`. */
  send(port: MessagePort, m: EngineMessage): void {
    port.postMessage(m);
  }

  /** Number of live worker threads. */
  get threads(): number {
    return this.piscina.threads.length;
  }

  /** Terminates every worker. */
  async close(): Promise<void> {
    for (const p of this.ports) p.close();
    await this.piscina.destroy();
  }
}

function isPort(v: unknown): v is MessagePort {
  return typeof v === 'object' && v !== null && typeof (v as MessagePort).postMessage === 'function';
}

/** The pool options of resolved settings. */
export function poolOptionsOf(o: ResolvedOptions): PoolOptions {
  return {
    concurrency: o.concurrency,
    minThreads: o.minThreads,
    maxOldGenerationSizeMb: o.workerHeapMb,
    idleTimeout: defaultPoolOptions().idleTimeout,
  };
}

/** True when two pool settings would build the same pool. */
export function samePoolOptions(a: PoolOptions, b: PoolOptions): boolean {
  return (
    a.concurrency === b.concurrency &&
    a.minThreads === b.minThreads &&
    a.maxOldGenerationSizeMb === b.maxOldGenerationSizeMb &&
    a.idleTimeout === b.idleTimeout
  );
}
