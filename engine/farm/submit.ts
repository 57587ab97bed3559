/**
 * A batch run on a farm (`sluice batch --queue`, `Engine.batch` with
 * `queue`): every item is submitted to the queue as item `<id>` of batch
 * `<session>`, and the results come back from the queue as workers record
 * them, in completion order (or input order with `ordered`).
 *
 * Resume is the queue's: the batch's results recorded so far are read
 * first, those items are not submitted again and their results are
 * returned with `resumed: true`; the others are submitted, and a
 * resubmission of one that was already queued (a submitter that died after
 * submitting) is dropped by the queue's duplicate window, or settled unrun
 * by the worker that takes it once a result stands. Cancelling (`signal`)
 * withdraws the batch: workers cancel its running calls and take none of
 * its queued ones; what has no result after a grace period is recorded
 * `cancelled` by the submitter itself, fenced like any result, so each item
 * still ends with exactly one.
 *
 * Memory: the results are references (the output is in the shared store);
 * the run keeps the ids of the items in flight and, for an ordered batch,
 * the results that wait for an earlier one.
 */

import { type BatchResult, failure } from '../batch/batch.js';
import { Changes } from '../batch/changes.js';
import { parseItem } from '../batch/items.js';
import { ResultOrder } from '../batch/result-order.js';
import { BadArgumentsError, type ErrorCode, type SluiceError } from '../protocol/errors.js';
import { FarmQueue } from './queue.js';
import type { FarmCall, FarmResult } from './records.js';

/** Options of a farm batch. */
export interface FarmBatchOptions {
  /** The queue, open or as its URL (`nats://host:port/NAME`; opened and closed by the batch). */
  readonly queue: FarmQueue | string;
  /** The batch's session: its id on the queue, and the session of items that name none. Required. */
  readonly session?: string;
  /** Results in input order instead of completion order. @default false */
  readonly ordered?: boolean;
  /** Return results already recorded for the batch instead of submitting those items again. @default true */
  readonly resume?: boolean;
  /** Cancels the batch: nothing more is submitted, the batch is withdrawn, every pending item gets a result. */
  readonly signal?: AbortSignal;
  /** After a cancel, how long workers have to record the results of the calls they cancel, in milliseconds. @default 3000 */
  readonly cancelGraceMs?: number;
}

/** Pause before submitting again into a full queue (EQUEUEFULL): workers take items meanwhile. */
const FULL_RETRY_MS = 200;
/**
 * Submissions awaiting the server's answer at once: one at a time, a batch
 * is submitted at one round trip per item, slower than a farm takes them;
 * the window bounds what waits (an item's call, at most MAX_CALL_BYTES).
 */
const SUBMIT_WINDOW = 64;

/** Runs `input` on the farm behind `options.queue` (see the module comment). */
export async function* runFarmBatch(
  input: Iterable<unknown> | AsyncIterable<unknown>,
  options: FarmBatchOptions,
): AsyncGenerator<BatchResult, void, undefined> {
  const session = options.session;
  if (session === undefined || session === '') {
    throw new BadArgumentsError('a batch on a farm queue needs a session: its id on the queue and its resume point');
  }
  const queue = typeof options.queue === 'string' ? await FarmQueue.open(options.queue) : options.queue;
  const run = new FarmRun(queue, session, options);
  try {
    yield* run.results(input);
  } finally {
    await run.close();
    if (typeof options.queue === 'string') await queue.close();
  }
}

/** One farm batch's state. */
class FarmRun {
  private readonly resume: boolean;
  private readonly graceMs: number;
  /** Results recorded before this run started (resume), by item id. */
  private readonly earlier = new Map<string, FarmResult>();
  /** Items submitted and waiting for a result: id → input index. */
  private readonly pending = new Map<string, number>();
  private readonly ids = new Set<string>();
  private readonly order: ResultOrder<BatchResult>;
  private readCount = 0;
  private readerDone = false;
  private readerError: unknown;
  private followError: unknown;
  private cancelled = false;
  private readonly changes = new Changes();
  private readonly stopFollow = new AbortController();
  private follower: Promise<void> | undefined;

  constructor(
    private readonly queue: FarmQueue,
    private readonly session: string,
    private readonly options: FarmBatchOptions,
  ) {
    this.order = new ResultOrder(options.ordered === true);
    this.resume = options.resume !== false;
    this.graceMs = options.cancelGraceMs ?? 3000;
  }

  async *results(input: Iterable<unknown> | AsyncIterable<unknown>): AsyncGenerator<BatchResult, void, undefined> {
    const signal = this.options.signal;
    if (await this.queue.isWithdrawn(this.session)) {
      throw new BadArgumentsError(
        `batch ${JSON.stringify(this.session)} was cancelled on queue ${this.queue.address.display}; run it again under a new session`,
        { session: this.session },
      );
    }
    if (this.resume) {
      for await (const r of this.queue.results(this.session)) this.earlier.set(r.itemId, r.result);
    }
    this.follower = this.follow();
    const cancel = () => void this.cancel();
    if (signal?.aborted) cancel();
    signal?.addEventListener('abort', cancel, { once: true });
    void this.read(input);
    try {
      for (;;) {
        for (let r = this.order.take(); r !== undefined; r = this.order.take()) if (r) yield r;
        if (this.followError !== undefined) throw this.followError;
        if (this.readerDone && this.pending.size === 0 && this.order.empty) break;
        await this.changes.next();
      }
      if (this.readerError !== undefined) throw this.readerError;
    } finally {
      signal?.removeEventListener('abort', cancel);
    }
  }

  async close(): Promise<void> {
    this.cancelled = true;
    this.stopFollow.abort();
    await this.follower;
  }

  /** Reads and submits the input, up to SUBMIT_WINDOW items under way; an item recorded earlier is returned, not submitted. */
  private async read(input: Iterable<unknown> | AsyncIterable<unknown>): Promise<void> {
    const submitting = new Set<Promise<void>>();
    try {
      for await (const value of input) {
        if (this.cancelled || this.readerError !== undefined) break;
        const index = this.readCount++;
        const submitted: Promise<void> = this.submitItem(index, value)
          .catch((err: unknown) => {
            this.readerError ??= err;
          })
          .finally(() => submitting.delete(submitted));
        submitting.add(submitted);
        if (submitting.size >= SUBMIT_WINDOW) await Promise.race(submitting);
      }
    } catch (err) {
      this.readerError ??= err;
    } finally {
      await Promise.all(submitting);
      this.readerDone = true;
      this.changes.signal();
    }
  }

  private async submitItem(index: number, value: unknown): Promise<void> {
    const parsed = parseItem(value);
    if (parsed.kind === 'blank') return this.deliver(index, null);
    if (parsed.kind === 'bad') return this.deliver(index, failure(parsed.id, index, parsed.error));
    const { call: item } = parsed;
    if (this.ids.has(item.id)) {
      return this.deliver(
        index,
        failure(item.id, index, new BadArgumentsError(`duplicate id ${JSON.stringify(item.id)} in this batch`)),
      );
    }
    this.ids.add(item.id);
    const earlier = this.earlier.get(item.id);
    if (earlier !== undefined) {
      this.earlier.delete(item.id);
      return this.deliver(index, { id: item.id, index, farm: earlier, resumed: true });
    }
    const call: FarmCall = {
      tool: item.tool,
      args: item.args ?? {},
      session: item.session ?? this.session,
      ...(item.sandbox !== undefined ? { options: { sandbox: item.sandbox } } : {}),
    };
    // Pending before it is submitted: its result may come back before the submit's answer does.
    this.pending.set(item.id, index);
    for (;;) {
      try {
        await this.queue.submit(this.session, item.id, call);
        return;
      } catch (err) {
        const code = (err as { code?: ErrorCode }).code;
        if (code === 'EQUEUEFULL' && !this.cancelled) {
          await sleep(FULL_RETRY_MS);
          continue;
        }
        this.pending.delete(item.id);
        if (code === 'ERESOURCELIMIT' || code === 'EBADARGS' || code === 'EPROTOCOL' || code === 'EQUEUEFULL') {
          return this.deliver(index, failure(item.id, index, err as SluiceError));
        }
        throw err;
      }
    }
  }

  /** Follows the batch's results from the queue, returning those of this run's items. */
  private async follow(): Promise<void> {
    try {
      for await (const r of this.queue.results(this.session, { follow: true, signal: this.stopFollow.signal })) {
        this.settle(r.itemId, r.result);
      }
    } catch (err) {
      if (!this.stopFollow.signal.aborted) {
        this.followError = err;
        this.changes.signal();
      }
    }
  }

  private settle(itemId: string, result: FarmResult): void {
    const index = this.pending.get(itemId);
    if (index === undefined) return;
    this.pending.delete(itemId);
    this.deliver(index, { id: itemId, index, farm: result });
  }

  /** Cancels the batch (see the module comment). */
  private async cancel(): Promise<void> {
    if (this.cancelled) return;
    this.cancelled = true;
    const cancelled: FarmResult = {
      status: 'cancelled',
      worker: this.queue.worker,
      attempts: 0,
      error: {
        code: 'ECANCELLED',
        message: 'the batch was cancelled by its submitter before a worker finished this item',
      },
    };
    try {
      await this.queue.withdraw(this.session);
      // Workers see the mark within their poll and record the calls they cancel.
      const until = Date.now() + this.graceMs;
      while (this.pending.size > 0 && Date.now() < until) await Promise.race([this.changes.next(), sleep(50)]);
      for (const [itemId] of [...this.pending]) {
        const outcome = await this.queue.recordResult(this.session, itemId, cancelled);
        this.settle(itemId, outcome.outcome === 'recorded' ? cancelled : outcome.existing);
      }
    } catch (err) {
      this.followError = err;
      this.changes.signal();
    }
  }

  private deliver(index: number, r: BatchResult | null): void {
    this.order.deliver(index, r);
    this.changes.signal();
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
