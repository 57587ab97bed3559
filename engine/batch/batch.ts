/**
 * The batch runner behind `Engine.batch` and `sluice batch`: calls read from
 * an iterable run with bounded concurrency, and their terminal results come
 * back as an async iterator.
 *
 * Memory is bounded by the concurrency, never by the input: the input is
 * pulled only while fewer than `concurrency` items are running or waiting to
 * be consumed, so a consumer that stops pulling stops the reading too. With
 * `ordered`, results come back in input order; an item is read only while it
 * is fewer than 4 x `concurrency` items past the oldest result not yet
 * returned, so at most that many results wait for an earlier one (each is a
 * terminal result: bounded previews, never a whole output).
 *
 * Resume: an item whose id already has a recorded outcome in its session
 * (any status but `cancelled`; see engine/sessions/completed-index.ts) is not
 * run again; its recorded result is returned with `resumed: true`. An item
 * runs as call id `<id>`, or `<id>#<n>` when its session already holds
 * attempts of it (cancelled, interrupted, or any with `resume: false`).
 */

import type { Store } from '../../store/store.js';
import type { CallHandle } from '../engine.js';
import { BadArgumentsError, type ErrorCode, type SluiceError, toSluiceError } from '../protocol/errors.js';
import type { TerminalResult } from '../result.js';
import { type CompletedIndex, openCompletedIndex } from '../sessions/completed-index.js';
import { parseItem } from './items.js';

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
}

/** One result of a batch. */
export interface BatchResult {
  /** The item's id; null when the item had no usable id. */
  id: string | null;
  /** The item's position in the input, from 0 (blank lines count, so line = index + 1). */
  index: number;
  /** The call's terminal result; absent for an item that was not a valid call. */
  result?: TerminalResult;
  /** Why the item was not run (EBADARGS, EUNKNOWNTOOL, ...); absent when it ran. */
  error?: { code: ErrorCode; message: string };
  /** True when the result was recorded by an earlier run of the batch, which this one resumed. */
  resumed?: true;
}

/** What the runner needs of an engine. */
export interface BatchEngine {
  readonly store: Store;
  readonly options: { readonly concurrency: number };
  call(tool: string, args: unknown, options: { session?: string; callId?: string }): CallHandle;
}

/** Session logs a batch keeps open for resume at once (items naming many sessions reopen the oldest). */
const MAX_OPEN_INDEXES = 32;

/** How far ahead of the oldest unreturned result an ordered batch may read, in multiples of its concurrency. */
const ORDERED_WINDOW = 4;

/** True when a result counts as a failure for the batch (the CLI's exit status). */
export function batchFailed(r: BatchResult): boolean {
  return r.error !== undefined || (r.result !== undefined && r.result.status !== 'success');
}

/** Runs `input` on `engine` (see the module comment). */
export async function* runBatch(
  engine: BatchEngine,
  input: Iterable<unknown> | AsyncIterable<unknown>,
  options: BatchOptions = {},
): AsyncGenerator<BatchResult, void, undefined> {
  const limit = Math.max(1, Math.floor(options.concurrency ?? engine.options.concurrency));
  const ordered = options.ordered === true;
  const resume = options.resume !== false;
  const ids = new Set<string>();
  const indexes = new Map<string, { index: Promise<CompletedIndex>; users: number }>();
  const running = new Set<CallHandle>();
  /** Results ready to return: in completion order, or (ordered) by index. */
  const ready: BatchResult[] = [];
  const byIndex = new Map<number, BatchResult | null>();
  let nextIndex = 0;
  let read = 0;
  let inflight = 0;
  let readerDone = false;
  let readerError: unknown;
  let stopped = false;
  let waiters: Array<() => void> = [];
  const changed = () => new Promise<void>((r) => waiters.push(r));
  const signalChange = () => {
    const w = waiters;
    waiters = [];
    for (const r of w) r();
  };

  const stop = () => {
    if (stopped) return;
    stopped = true;
    for (const h of running) h.cancel('the batch was stopped');
    signalChange();
  };
  if (options.signal?.aborted) stop();
  options.signal?.addEventListener('abort', stop, { once: true });

  const deliver = (index: number, r: BatchResult | null) => {
    if (ordered) byIndex.set(index, r);
    else if (r) ready.push(r);
    signalChange();
  };
  const hasRoom = () =>
    ordered ? read - nextIndex < limit * ORDERED_WINDOW && inflight < limit : inflight + ready.length < limit;

  /** Runs `fn` on `session`'s index, opening it if needed; at most MAX_OPEN_INDEXES logs stay open. */
  const withIndex = async <T>(session: string, fn: (idx: CompletedIndex) => Promise<T>): Promise<T> => {
    let entry = indexes.get(session);
    if (entry) indexes.delete(session);
    entry ??= { index: openCompletedIndex(engine.store, session), users: 0 };
    // Map order is recency: the entry goes last.
    indexes.set(session, entry);
    for (const [s, e] of indexes) {
      if (indexes.size <= MAX_OPEN_INDEXES) break;
      if (e.users > 0 || e === entry) continue;
      indexes.delete(s);
      void e.index.then((i) => i.close()).catch(() => {});
    }
    entry.users++;
    try {
      return await fn(await entry.index);
    } finally {
      entry.users--;
    }
  };

  const runItem = async (index: number, value: unknown): Promise<void> => {
    const parsed = parseItem(value);
    if (parsed.kind === 'blank') return deliver(index, null);
    if (parsed.kind === 'bad') return deliver(index, failure(parsed.id, index, parsed.error));
    const { call } = parsed;
    if (ids.has(call.id)) {
      return deliver(index, failure(call.id, index, badArgs(`duplicate id ${JSON.stringify(call.id)} in this batch`)));
    }
    ids.add(call.id);
    const session = call.session ?? options.session;
    try {
      let callId = call.id;
      if (session !== undefined) {
        // Even without resume, a call id the session has seen is never reused (see completed-index.ts).
        const found = await withIndex(session, async (idx) =>
          resume && idx.has(call.id) ? { recorded: await idx.result(call.id) } : { callId: idx.nextCallId(call.id) },
        );
        if ('recorded' in found) return deliver(index, { id: call.id, index, result: found.recorded, resumed: true });
        callId = found.callId;
      }
      if (stopped) return deliver(index, null);
      const handle = engine.call(call.tool, call.args, { callId, ...(session !== undefined ? { session } : {}) });
      running.add(handle);
      try {
        deliver(index, { id: call.id, index, result: await handle.result });
      } finally {
        running.delete(handle);
      }
    } catch (err) {
      deliver(index, failure(call.id, index, toSluiceError(err, 'EBADARGS')));
    }
  };

  const reader = (async () => {
    try {
      for await (const value of input) {
        while (!stopped && !hasRoom()) await changed();
        if (stopped) break;
        const index = read++;
        inflight++;
        void runItem(index, value).finally(() => {
          inflight--;
          signalChange();
        });
      }
    } catch (err) {
      readerError = err;
    } finally {
      readerDone = true;
      signalChange();
    }
  })();

  try {
    for (;;) {
      if (ordered) {
        while (byIndex.has(nextIndex)) {
          const r = byIndex.get(nextIndex);
          byIndex.delete(nextIndex);
          nextIndex++;
          signalChange();
          if (r) yield r;
        }
      } else {
        while (ready.length > 0) {
          const r = ready.shift() as BatchResult;
          signalChange();
          yield r;
        }
      }
      if (readerDone && inflight === 0 && ready.length === 0 && !byIndex.has(nextIndex)) break;
      await changed();
    }
    if (readerError !== undefined) throw readerError;
  } finally {
    // A consumer that stops early (break, return) stops the batch: nothing keeps running unseen.
    stop();
    options.signal?.removeEventListener('abort', stop);
    // The reader is not awaited: it may be waiting for input that never comes (a terminal's
    // stdin); once stopped it reads nothing more and starts nothing more.
    void reader;
    while (inflight > 0) await changed();
    for (const e of indexes.values()) await e.index.then((i) => i.close()).catch(() => {});
  }
}

function badArgs(message: string): SluiceError {
  return new BadArgumentsError(message);
}

function failure(id: string | null, index: number, err: SluiceError): BatchResult {
  return { id, index, error: { code: err.code, message: err.message } };
}
