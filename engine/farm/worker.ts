/**
 * A farm worker: takes items from a {@link FarmQueue} and runs them on its
 * own engine (its concurrency, tools and sandbox policy), recording each
 * call in the batch's session and its result in the queue. The order is
 * what makes a result exactly-once: the call ends (its output published and
 * its session record fsynced), then the result is recorded (fenced on the
 * server: the first stands), then the delivery is acknowledged. A worker
 * that dies before the ack leaves the item to be delivered again, and the
 * next taker settles it unrun when a result already stands (queue.ts,
 * take). The lease is renewed while the call runs and while its result is
 * being recorded.
 */
import { Changes } from '../batch/changes.js';
import type { CallHandle, CallOptions } from '../call/call-types.js';
import { toSluiceError } from '../protocol/errors.js';
import type { SandboxSpec } from '../protocol/sandbox.js';
import type { OutputRef, TerminalResult } from '../result.js';
import type { Delivery } from './lease.js';
import type { FarmQueue } from './queue.js';
import type { FarmCall, FarmResult } from './records.js';

/** What a worker needs of an engine. */
export interface FarmWorkerEngine {
  readonly options: { readonly concurrency: number };
  call(tool: string, args: unknown, options: CallOptions): CallHandle;
}

/** Options of a {@link FarmWorker}. */
export interface FarmWorkerOptions {
  /** Calls run at once (an ended call's result is recorded while the next runs). @default the engine's `concurrency` */
  readonly concurrency?: number;
  /** How often the batches of running calls are checked for a withdrawal, in milliseconds. @default 1000 */
  readonly withdrawPollMs?: number;
  /** Called with what went wrong talking to the queue (the worker keeps going). @default none */
  readonly onError?: (err: unknown) => void;
}

/** A worker's load since it started, for health and metrics. */
export interface FarmWorkerLoad {
  /** Items running now. */
  readonly running: number;
  /** Deliveries taken and run (or failed at once: an unknown tool). */
  readonly taken: number;
  /** Items whose result this worker recorded, whatever their status. */
  readonly completed: number;
  /** Of those, results whose status is not `success`. */
  readonly failed: number;
  /** Deliveries taken that were not an item's first (another worker died, stalled or handed it back). */
  readonly redelivered: number;
  /** Results refused because another worker's result stood first (this one had stalled past its lease). */
  readonly fenced: number;
  /** Deliveries handed back unfinished by a drain that ran out of time. */
  readonly released: number;
  /** True from {@link FarmWorker.stop} on: taking no more. */
  readonly draining: boolean;
  /** When a pull from the queue last returned (ms since the epoch), 0 before the first: a stale one means the queue is unreachable. */
  readonly lastPollAt: number;
}

/** The `artifact://` URI of a call's output: its manifest (streams) or its blob (one output); null for a page or nothing published. */
export function outputUri(output: OutputRef | null): string | null {
  if (output === null) return null;
  if (output.kind === 'streams') return `artifact://${output.manifest}`;
  if (output.kind === 'single') return `artifact://${output.digest}`;
  return null;
}

/** Bytes an output holds, every stream. */
export function outputBytes(o: OutputRef | null | undefined): number {
  if (!o) return 0;
  if (o.kind === 'streams') return o.streams.reduce((n, s) => n + s.bytes, 0);
  return o.bytes;
}

/** The call id of an item's delivery: the item id for the first, `<id>#<n>` after, as a local batch's attempts are named (sessions/completed-index.ts). */
export const deliveryCallId = (itemId: string, attempt: number): string =>
  attempt <= 1 ? itemId : `${itemId}#${attempt}`;

/** Pause after a failed pull or record before trying again: the server may be restarting. */
const RETRY_MS = 250;
/** How long one pull waits for items; a drain waits for the pulls out to end, so at most this. */
const PULL_MS = 1000;
/**
 * Pulls out at once. A pull asks for every slot free when it starts; a slot
 * freed while this many are out waits for one of them to end (it ends as
 * soon as its items came, at the latest after PULL_MS).
 */
const MAX_PULLS = 4;
/** How long a result is retried before the delivery is left to its lease (another worker runs the item again). */
const RECORD_PATIENCE_MS = 60_000;

interface Running {
  readonly delivery: Delivery;
  handle?: CallHandle;
  /** Handed back by a drain past its deadline: its result is not recorded. */
  released: boolean;
}

/** Runs a queue's items on an engine until stopped (see the module comment). */
export class FarmWorker {
  readonly #engine: FarmWorkerEngine;
  readonly #queue: FarmQueue;
  readonly #limit: number;
  readonly #pollMs: number;
  readonly #onError: (err: unknown) => void;
  readonly #running = new Set<Running>();
  /** Of the running items, those whose call has not ended (the rest are recording their result). */
  #calling = 0;
  /** Items asked for by the pulls out and not yet come: with the calls running, never more than the concurrency. */
  #requested = 0;
  /** Acknowledgements under way: a slot is free once its result is recorded, and the drain waits for these. */
  readonly #acks = new Set<Promise<unknown>>();
  #taken = 0;
  #completed = 0;
  #failed = 0;
  #redelivered = 0;
  #fenced = 0;
  #released = 0;
  #lastPollAt = 0;
  #stopping = false;
  readonly #changes = new Changes();
  #loop: Promise<void> | undefined;

  constructor(engine: FarmWorkerEngine, queue: FarmQueue, options: FarmWorkerOptions = {}) {
    this.#engine = engine;
    this.#queue = queue;
    this.#limit = Math.max(1, Math.floor(options.concurrency ?? engine.options.concurrency));
    this.#pollMs = options.withdrawPollMs ?? 1000;
    this.#onError = options.onError ?? (() => {});
  }

  /** The worker's load now. */
  get load(): FarmWorkerLoad {
    return {
      running: this.#running.size,
      taken: this.#taken,
      completed: this.#completed,
      failed: this.#failed,
      redelivered: this.#redelivered,
      fenced: this.#fenced,
      released: this.#released,
      draining: this.#stopping,
      lastPollAt: this.#lastPollAt,
    };
  }

  /** Starts taking items; resolves once {@link stop} was called and every running item is settled. */
  run(): Promise<void> {
    this.#loop ??= this.#takeLoop();
    return this.#loop;
  }

  /**
   * Drains: takes nothing more, lets running calls finish and records their
   * results; those still running after `deadlineMs` are handed back to the
   * queue (another worker runs them) and cancelled here. Resolves once
   * nothing runs.
   */
  async stop(deadlineMs = Number.POSITIVE_INFINITY): Promise<void> {
    this.#stopping = true;
    this.#changes.signal();
    // Handed back only once the take loop has ended: a pull still pending would be given the item again.
    const loop = this.#loop ?? Promise.resolve();
    const timer =
      Number.isFinite(deadlineMs) && this.#running.size > 0
        ? setTimeout(() => void loop.then(() => this.#handBack()), Math.max(0, deadlineMs))
        : undefined;
    try {
      while (this.#running.size > 0) await this.#changes.next();
      await this.#loop;
      await Promise.all(this.#acks);
    } finally {
      clearTimeout(timer);
    }
  }

  #handBack(): void {
    for (const r of this.#running) {
      if (r.released) continue;
      r.released = true;
      this.#released++;
      // Back to the queue first, so the item is not left to its lease; then this run ends.
      r.delivery.release();
      r.handle?.cancel('the worker is draining and handed the item back');
    }
  }

  /**
   * Keeps the concurrency full: whenever slots are free and not yet asked
   * for, a pull asks for all of them at once, so a worker's items arrive
   * together and are admitted together instead of one round trip each.
   */
  async #takeLoop(): Promise<void> {
    const watcher = setInterval(() => void this.#watchWithdrawals(), this.#pollMs);
    watcher.unref();
    const pulls = new Set<Promise<void>>();
    try {
      while (!this.#stopping) {
        // A call's slot is free once it ended: its result is recorded meanwhile. Results that the queue
        // is slow to take stop the taking once more wait than calls may run.
        const recording = this.#running.size - this.#calling;
        const free = this.#limit - this.#calling - this.#requested;
        if (free <= 0 || recording > this.#limit || pulls.size >= MAX_PULLS) {
          await this.#changes.next();
          continue;
        }
        const pull: Promise<void> = this.#pull(free).finally(() => {
          pulls.delete(pull);
          this.#changes.signal();
        });
        pulls.add(pull);
      }
      // A pull still out may yet be given items: they are handed back, and the drain waits for that.
      await Promise.all(pulls);
    } finally {
      clearInterval(watcher);
    }
  }

  /** One pull of `n` items, each started as it comes (or handed back when the drain began meanwhile). */
  async #pull(n: number): Promise<void> {
    this.#requested += n;
    let came = 0;
    try {
      for await (const d of this.#queue.pull(n, { timeoutMs: PULL_MS })) {
        came++;
        this.#requested--;
        this.#lastPollAt = Date.now();
        // Taken as the drain began: another worker gets it at once.
        if (this.#stopping) d.release();
        else this.#start(d);
      }
      this.#lastPollAt = Date.now();
    } catch (err) {
      this.#onError(err);
      await sleep(RETRY_MS);
    } finally {
      this.#requested -= n - came;
    }
  }

  #start(d: Delivery): void {
    const entry: Running = { delivery: d, released: false };
    this.#running.add(entry);
    this.#calling++;
    this.#taken++;
    if (d.attempt > 1) this.#redelivered++;
    void this.#runOne(entry)
      .catch((err: unknown) => this.#onError(err))
      .finally(() => {
        this.#running.delete(entry);
        this.#changes.signal();
      });
  }

  async #runOne(entry: Running): Promise<void> {
    const d = entry.delivery;
    const recorded = await d.hold(async () => {
      let result: FarmResult;
      try {
        result = await this.#call(entry);
      } finally {
        this.#calling--;
        this.#changes.signal();
      }
      // The pull for the freed slot goes out first: it is on the next call's path, the result is not.
      await new Promise<void>((r) => setImmediate(r));
      if (entry.released) return false;
      return this.#record(d, result);
    });
    if (!recorded) return;
    // The slot is free once the result stands: the acknowledgement is the queue's bookkeeping (a lost one is settled on redelivery).
    const ack: Promise<unknown> = d.complete().finally(() => this.#acks.delete(ack));
    this.#acks.add(ack);
  }

  /** Runs the delivery's call to its end; a call the engine refuses (unknown tool, bad arguments) is a failed result at once. */
  async #call(entry: Running): Promise<FarmResult> {
    const d = entry.delivery;
    const worker = this.#queue.worker;
    let handle: CallHandle;
    try {
      handle = this.#engine.call(d.call.tool, d.call.args, callOptions(d));
    } catch (err) {
      const e = toSluiceError(err, 'EBADARGS');
      return { status: 'failed', worker, attempts: d.attempt, error: { code: e.code, message: e.message } };
    }
    entry.handle = handle;
    return farmResultOf(await handle.result, worker, d.attempt);
  }

  /** Records `result` (retrying while the queue is unreachable); false when it could not be, so the delivery is left to its lease. */
  async #record(d: Delivery, result: FarmResult): Promise<boolean> {
    const until = Date.now() + RECORD_PATIENCE_MS;
    for (;;) {
      try {
        const outcome = await this.#queue.recordResult(d.batchId, d.itemId, result);
        if (outcome.outcome === 'recorded') {
          this.#completed++;
          if (result.status !== 'success') this.#failed++;
        } else this.#fenced++;
        return true;
      } catch (err) {
        this.#onError(err);
        if (Date.now() > until) return false;
        await sleep(RETRY_MS);
      }
    }
  }

  /** Cancels the running calls of batches that were withdrawn (a submitter's Ctrl-C). */
  async #watchWithdrawals(): Promise<void> {
    const batches = new Set<string>();
    for (const r of this.#running) if (r.handle) batches.add(r.delivery.batchId);
    for (const batchId of batches) {
      let withdrawn: boolean;
      try {
        withdrawn = await this.#queue.isWithdrawn(batchId);
      } catch (err) {
        this.#onError(err);
        return;
      }
      if (!withdrawn) continue;
      for (const r of this.#running) {
        if (r.delivery.batchId === batchId) r.handle?.cancel('the batch was withdrawn by its submitter');
      }
    }
  }
}

/** The engine call options of a delivery: its attempt's call id, its session, and the options a farm call may carry. */
function callOptions(d: Delivery): CallOptions {
  const call: FarmCall = d.call;
  const o = call.options ?? {};
  return {
    callId: deliveryCallId(d.itemId, d.attempt),
    ...(call.session !== undefined ? { session: call.session } : {}),
    ...(o.sandbox !== undefined ? { sandbox: o.sandbox as SandboxSpec } : {}),
    ...(typeof o.timeoutMs === 'number' ? { timeoutMs: o.timeoutMs } : {}),
  };
}

/** A terminal result as a farm result: references only. */
export function farmResultOf(r: TerminalResult, worker: string, attempts: number): FarmResult {
  return {
    status: r.status,
    worker,
    attempts,
    callId: r.callId,
    output: outputUri(r.output),
    durationMs: r.durationMs,
    bytes: outputBytes(r.output),
    ...(r.error ? { error: { code: r.error.code, message: r.error.message } } : {}),
  };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
