/**
 * The batch runner behind `Engine.batch` and `sluice batch`. Memory is
 * bounded by the concurrency, never by the input: the input is pulled only
 * while fewer than `concurrency` items run or wait to be consumed, so a
 * consumer that stops pulling stops the reading too; an ordered batch reads
 * at most {@link ORDERED_WINDOW} x `concurrency` items past the oldest
 * unreturned result. An item whose id already has a recorded outcome in its
 * session is not run again (engine/sessions/completed-index.ts).
 */

import type { Store } from '../../store/store.js';
import type { CallHandle } from '../engine.js';
import type { FarmQueue } from '../farm/queue.js';
import type { FarmResult } from '../farm/records.js';
import { BadArgumentsError, type ErrorCode, type SluiceError, toSluiceError } from '../protocol/errors.js';
import type { SandboxSpec } from '../protocol/sandbox.js';
import type { TerminalResult } from '../result.js';
import { type CompletedIndex, openCompletedIndex } from '../sessions/completed-index.js';
import { Changes } from './changes.js';
import { parseItem } from './items.js';
import { ResultOrder } from './result-order.js';

export type { BatchCall } from './items.js';

/** Options of `Engine.batch`. */
export interface BatchOptions {
  /** Calls running at once. @default the engine's `concurrency` */
  concurrency?: number;
  /** The session of items that name none. @default none: such calls are not recorded */
  session?: string;
  /** Results in input order instead of completion order. @default false */
  ordered?: boolean;
  /** Skip items whose id already has a recorded outcome in its session, returning that result. @default true */
  resume?: boolean;
  /** Stops the batch: no further item is read, running calls are cancelled (their results still come back). */
  signal?: AbortSignal;
  /**
   * Runs the batch on a farm instead of this engine (docs/farm.md): the
   * queue, open or as its URL (`nats://host:port/NAME`). Needs `session`
   * (the batch's id on the queue); `concurrency` is then the workers'.
   * Results carry `farm` instead of `result`; `signal` withdraws the batch
   * (workers cancel its running calls, every pending item is recorded
   * `cancelled`). Breaking out of the loop leaves the batch running on the
   * farm, to be resumed.
   * @default none: the batch runs on this engine
   */
  queue?: FarmQueue | string;
}

/** One result of a batch. */
export interface BatchResult {
  /** The item's id; null when the item had no usable id. */
  id: string | null;
  /** The item's position in the input, from 0 (blank lines count, so line = index + 1). */
  index: number;
  /** The call's terminal result; absent for an item that was not a valid call, or that ran on a farm. */
  result?: TerminalResult;
  /** On a farm: the result a worker recorded (status, the output's `artifact://` URI, the worker, the attempts). */
  farm?: FarmResult;
  /** Why the item was not run (EBADARGS, EUNKNOWNTOOL, ...); absent when it ran. */
  error?: { code: ErrorCode; message: string };
  /** True when the result was recorded by an earlier run of the batch, which this one resumed. */
  resumed?: true;
}

/** What the runner needs of an engine. */
export interface BatchEngine {
  readonly store: Store;
  readonly options: { readonly concurrency: number };
  call(tool: string, args: unknown, options: { session?: string; callId?: string; sandbox?: SandboxSpec }): CallHandle;
}

/** Session logs a batch keeps open for resume at once (items naming many sessions reopen the oldest). */
const MAX_OPEN_INDEXES = 32;

/** How far ahead of the oldest unreturned result an ordered batch may read, in multiples of its concurrency. */
const ORDERED_WINDOW = 4;

/** True when a result counts as a failure for the batch (the CLI's exit status). */
export function batchFailed(r: BatchResult): boolean {
  return (
    r.error !== undefined ||
    (r.result !== undefined && r.result.status !== 'success') ||
    (r.farm !== undefined && r.farm.status !== 'success')
  );
}

/** Runs `input` on `engine` (see the module comment). */
export async function* runBatch(
  engine: BatchEngine,
  input: Iterable<unknown> | AsyncIterable<unknown>,
  options: BatchOptions = {},
): AsyncGenerator<BatchResult, void, undefined> {
  if (options.queue !== undefined) {
    const { runFarmBatch } = await import('../farm/submit.js');
    const { queue, session, ordered, resume, signal } = options;
    yield* runFarmBatch(input, { queue, ...(session !== undefined ? { session } : {}), ordered, resume, signal });
    return;
  }
  const run = new BatchRun(engine, options);
  const stop = () => run.stop();
  if (options.signal?.aborted) stop();
  options.signal?.addEventListener('abort', stop, { once: true });
  // Not awaited: the reader may be waiting for input that never comes (a terminal's stdin); once
  // stopped it reads nothing more and starts nothing more.
  void run.read(input);
  try {
    yield* run.results();
  } finally {
    // A consumer that stops early (break, return) stops the batch: nothing keeps running unseen.
    stop();
    options.signal?.removeEventListener('abort', stop);
    await run.settled();
  }
}

/** Session logs a batch keeps open for resume, the most recently used last. */
class OpenIndexes {
  private readonly indexes = new Map<string, { index: Promise<CompletedIndex>; users: number }>();

  constructor(private readonly store: Store) {}

  /** Runs `fn` on `session`'s index, opening it if needed; at most MAX_OPEN_INDEXES logs stay open. */
  async with<T>(session: string, fn: (idx: CompletedIndex) => Promise<T>): Promise<T> {
    let entry = this.indexes.get(session);
    if (entry) this.indexes.delete(session);
    entry ??= { index: openCompletedIndex(this.store, session), users: 0 };
    // Map order is recency: the entry goes last.
    this.indexes.set(session, entry);
    for (const [s, e] of this.indexes) {
      if (this.indexes.size <= MAX_OPEN_INDEXES) break;
      if (e.users > 0 || e === entry) continue;
      this.indexes.delete(s);
      void e.index.then((i) => i.close()).catch(() => {});
    }
    entry.users++;
    try {
      return await fn(await entry.index);
    } finally {
      entry.users--;
    }
  }

  async closeAll(): Promise<void> {
    for (const e of this.indexes.values()) await e.index.then((i) => i.close()).catch(() => {});
  }
}

/** One batch's state: the items read and running, and the results not yet returned. */
class BatchRun {
  private readonly limit: number;
  private readonly ordered: boolean;
  private readonly resume: boolean;
  private readonly session: string | undefined;
  private readonly ids = new Set<string>();
  private readonly indexes: OpenIndexes;
  private readonly running = new Set<CallHandle>();
  private readonly order: ResultOrder<BatchResult>;
  private readCount = 0;
  private inflight = 0;
  private readerDone = false;
  private readerError: unknown;
  private stopped = false;
  private readonly changes = new Changes();

  constructor(
    private readonly engine: BatchEngine,
    options: BatchOptions,
  ) {
    this.limit = Math.max(1, Math.floor(options.concurrency ?? engine.options.concurrency));
    this.ordered = options.ordered === true;
    this.order = new ResultOrder(this.ordered);
    this.resume = options.resume !== false;
    this.session = options.session;
    this.indexes = new OpenIndexes(engine.store);
  }

  /** Stops the batch: no further item is read, running calls are cancelled. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const h of this.running) h.cancel('the batch was stopped');
    this.changes.signal();
  }

  /** Reads `input` while there is room, starting each item. */
  async read(input: Iterable<unknown> | AsyncIterable<unknown>): Promise<void> {
    try {
      for await (const value of input) {
        while (!this.stopped && !this.hasRoom()) await this.changes.next();
        if (this.stopped) break;
        const index = this.readCount++;
        this.inflight++;
        void this.runItem(index, value).finally(() => {
          this.inflight--;
          this.changes.signal();
        });
      }
    } catch (err) {
      this.readerError = err;
    } finally {
      this.readerDone = true;
      this.changes.signal();
    }
  }

  /** The results as they become ready to return; then the reader's error, if it failed. */
  async *results(): AsyncGenerator<BatchResult, void, undefined> {
    for (;;) {
      for (let r = this.take(); r !== undefined; r = this.take()) if (r) yield r;
      if (this.readerDone && this.inflight === 0 && this.order.empty) break;
      await this.changes.next();
    }
    if (this.readerError !== undefined) throw this.readerError;
  }

  /** Resolves once no item runs any more and the session logs are closed. */
  async settled(): Promise<void> {
    while (this.inflight > 0) await this.changes.next();
    await this.indexes.closeAll();
  }

  /** The next result to return: null for an item that gives none, undefined when none is ready. */
  private take(): BatchResult | null | undefined {
    const r = this.order.take();
    if (r !== undefined) this.changes.signal();
    return r;
  }

  private deliver(index: number, r: BatchResult | null): void {
    this.order.deliver(index, r);
    this.changes.signal();
  }

  private hasRoom(): boolean {
    return this.ordered
      ? this.readCount - this.order.nextIndex < this.limit * ORDERED_WINDOW && this.inflight < this.limit
      : this.inflight + this.order.waiting < this.limit;
  }

  private async runItem(index: number, value: unknown): Promise<void> {
    const parsed = parseItem(value);
    if (parsed.kind === 'blank') return this.deliver(index, null);
    if (parsed.kind === 'bad') return this.deliver(index, failure(parsed.id, index, parsed.error));
    const { call } = parsed;
    if (this.ids.has(call.id)) {
      const err = badArgs(`duplicate id ${JSON.stringify(call.id)} in this batch`);
      return this.deliver(index, failure(call.id, index, err));
    }
    this.ids.add(call.id);
    const session = call.session ?? this.session;
    try {
      const found = session === undefined ? { callId: call.id } : await this.lookUp(session, call.id);
      if ('recorded' in found)
        return this.deliver(index, { id: call.id, index, result: found.recorded, resumed: true });
      if (this.stopped) return this.deliver(index, null);
      const handle = this.engine.call(call.tool, call.args, {
        callId: found.callId,
        ...(session !== undefined ? { session } : {}),
        ...(call.sandbox !== undefined ? { sandbox: call.sandbox as SandboxSpec } : {}),
      });
      this.running.add(handle);
      try {
        this.deliver(index, { id: call.id, index, result: await handle.result });
      } finally {
        this.running.delete(handle);
      }
    } catch (err) {
      this.deliver(index, failure(call.id, index, toSluiceError(err, 'EBADARGS')));
    }
  }

  /**
   * The recorded result of item `id` in `session` when it is resumed, else the
   * call id to run it as: even without resume, a call id the session has seen
   * is never reused (see completed-index.ts).
   */
  private lookUp(session: string, id: string): Promise<{ recorded: TerminalResult } | { callId: string }> {
    return this.indexes.with(session, async (idx) =>
      this.resume && idx.has(id) ? { recorded: await idx.result(id) } : { callId: idx.nextCallId(id) },
    );
  }
}

/** An EBADARGS error. */
function badArgs(message: string): SluiceError {
  return new BadArgumentsError(message);
}

/** The result of an item that did not run. */
export function failure(id: string | null, index: number, err: SluiceError): BatchResult {
  return { id, index, error: { code: err.code, message: err.message } };
}
