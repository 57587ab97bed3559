/**
 * The worker pool: piscina runs tasks; each worker thread hands the engine one
 * MessagePort at startup (through piscina's message event) that carries every
 * call's data and control messages, tagged by call id.
 */
import { availableParallelism } from 'node:os';
import type { MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { workerEntry } from './paths.js';
import { killProcessGroup } from './process-group.js';
import { type EngineMessage, PORT_HANDSHAKE, type Task, type WorkerMessage } from './protocol/messages.js';

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

/** Default options. */
export function defaultPoolOptions(): PoolOptions {
  return {
    concurrency: Math.max(16, availableParallelism() * 2),
    minThreads: 1,
    maxOldGenerationSizeMb: 512,
    idleTimeout: 30_000,
  };
}

/** piscina plus the per-worker ports. */
export class WorkerPool {
  readonly piscina: Piscina;
  private readonly sinks = new Map<string, CallSink>();
  private readonly ports = new Set<MessagePort>();

  constructor(opts: PoolOptions) {
    this.piscina = new Piscina({
      filename: workerEntry(),
      minThreads: Math.min(opts.minThreads, opts.concurrency),
      maxThreads: opts.concurrency,
      // One call per thread: a tool that spins, crashes or exhausts its heap takes only its own call down.
      concurrentTasksPerWorker: 1,
      // Calls beyond the limit wait their turn instead of failing.
      maxQueue: Number.POSITIVE_INFINITY,
      idleTimeout: opts.idleTimeout,
      // A small young generation: a worker moving output allocates and drops many 64 KiB chunks,
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
