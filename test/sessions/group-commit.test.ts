/**
 * Group commit of a local session log (engine/sessions/log-writer.ts): lines
 * appended while a batch is written and fsynced wait and go together in the
 * next batch (one write, at most one fsync), in append order; a failed fsync
 * fails exactly the lines it covered. The log's writes and fsyncs are real;
 * the tests hold or fail them at chosen points, count the writer's appends
 * (to know a line has reached it) and record the log's writes as they are
 * issued (to know none was, without waiting for one that might come).
 */
import { promises as fsp } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readEventLog } from '../../engine/sessions/log-reader.js';
import { EventLogWriter } from '../../engine/sessions/log-writer.js';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { eventLogPath } from '../../engine/sessions/session-id.js';
import type { StoreFile } from '../../store/file.js';
import { realIO, type StoreIO } from '../../store/io.js';
import type { Store } from '../../store/store.js';
import { expectNoLeaks, tempStore } from '../store/helpers.js';
import { logLines, sha256, streamsResult, SYNTHETIC_TOOL as TOOL } from './helpers.js';

const recorders: SessionRecorder[] = [];
function recorderFor(store: Store): SessionRecorder {
  const r = new SessionRecorder(store);
  recorders.push(r);
  return r;
}
/**
 * The gates of this test's held fsyncs. A test that failed while holding one must not leave
 * close() waiting on it: after the test they are all let go, and later fsyncs pass.
 */
const heldGates: Array<Array<() => void>> = [];
const letGo = new WeakSet<Array<() => void>>();
afterEach(async () => {
  for (const gates of heldGates.splice(0)) {
    letGo.add(gates);
    for (const go of gates.splice(0)) go();
  }
  for (const r of recorders.splice(0)) await r.close();
  vi.restoreAllMocks();
});

/**
 * The real filesystem, with `datasync` run ahead of every fdatasync of an event log (it may wait
 * or throw), and the number of lines of every write to an event log pushed to `writes` when the
 * write is issued.
 */
function logHooks(hooks: { datasync?: () => Promise<void>; writes?: number[] }): StoreIO {
  const logs = new WeakSet<StoreFile>();
  return {
    ...realIO,
    open: async (path, flags, mode) => {
      const fh = await realIO.open(path, flags, mode);
      if (path.endsWith('events.log')) logs.add(fh);
      return fh;
    },
    write: (fh, buf, off, len, position) => {
      if (logs.has(fh))
        hooks.writes?.push(Buffer.from(buf.buffer, buf.byteOffset + off, len).filter((b) => b === 0x0a).length);
      return realIO.write(fh, buf, off, len, position);
    },
    datasync: async (fh) => {
      if (logs.has(fh)) await hooks.datasync?.();
      await realIO.datasync(fh);
    },
  };
}

/** A `datasync` hook: the first fsync waits for the test to let it go, then fails with EIO; later ones pass. */
function firstSyncFails(gates: Array<() => void>): () => Promise<void> {
  heldGates.push(gates);
  let syncs = 0;
  return async () => {
    if (++syncs > 1) return;
    if (!letGo.has(gates)) await new Promise<void>((go) => gates.push(go));
    throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
  };
}

/** A `datasync` hook: every fsync waits for the test to let it go. */
function heldSyncs(gates: Array<() => void>): () => Promise<void> {
  heldGates.push(gates);
  return async () => {
    if (!letGo.has(gates)) await new Promise<void>((go) => gates.push(go));
  };
}

/**
 * How many lines have been handed to an event log writer so far (the real `append` runs): a
 * record's line has reached the writer once counted, whatever the recorder awaited before.
 */
function countAppends(): () => number {
  const spy = vi.spyOn(EventLogWriter.prototype, 'append');
  return () => spy.mock.calls.length;
}

/** One turn of the event loop: a write issued on an append's own turn (or a microtask after it) has been issued by then. */
function nextTurn(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

/** Waits until `check` holds (the log's writes and fsyncs run on the thread pool). */
async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; !(await check()); i++) {
    if (i > 2000) throw new Error('condition not reached in 10 s');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** `'ok'`, or the code the promise was rejected with. */
function outcome(p: Promise<void>): Promise<string | undefined> {
  return p.then(
    () => 'ok',
    (e: { code?: string }) => e.code,
  );
}

/** The descriptors of this process open on the event log of `session`. */
async function openLogFds(store: Store, session: string): Promise<string[]> {
  const path = eventLogPath(store.layout, session);
  const fds = await fsp.readdir('/proc/self/fd');
  const targets = await Promise.all(fds.map((fd) => fsp.readlink(`/proc/self/fd/${fd}`).catch(() => '')));
  return fds.filter((_, i) => targets[i] === path);
}

/** The call ids of the records in the log of `session`, in file order. */
async function recordIds(store: Store, session: string): Promise<string[]> {
  const log = await readEventLog(store, session);
  expect(log.corrupt).toBe(0);
  return log.records.map((r) => ('callId' in r ? r.callId : ''));
}

describe('session log group commit', () => {
  it('lets concurrent terminal records share fsyncs (group commit)', async () => {
    const writes: number[] = [];
    const store = await tempStore({ io: logHooks({ writes }) });
    const rec = recorderFor(store);
    const n = 64;
    await Promise.all(
      Array.from({ length: n }, (_, i) => rec.completed(streamsResult(`c${i}`, 'busy', sha256(`m${i}`), []))),
    );
    // Each completion waited for an fsync after its write, but they shared them. All 64 records wait
    // for the log to open (real I/O, so it ends after every one of them is framed): the first line
    // then goes alone, the others queue meanwhile and go together (one write, one fsync).
    expect(await rec.stats('busy')).toEqual({ appends: n, syncs: 2 });
    expect(writes).toEqual([1, n - 1]);
    expect(await recordIds(store, 'busy')).toEqual(Array.from({ length: n }, (_, i) => `c${i}`));
  });

  it('lines appended while an fsync is in flight wait for it, then share one write and one fsync', async () => {
    // Every fsync of the log waits for the test to let it go; the writes are real.
    const gates: Array<() => void> = [];
    const writes: number[] = [];
    const store = await tempStore({ io: logHooks({ datasync: heldSyncs(gates), writes }) });
    const rec = recorderFor(store);
    const appended = countAppends();
    const settled: string[] = [];
    const first = rec.completed(streamsResult('c0', 'held', sha256('m0'), [])).then(() => settled.push('c0 completed'));
    await until(() => gates.length === 1);
    // The first fsync is held: a started line and a completion appended now are not written yet.
    const started = rec
      .started({ callId: 'c1', tool: TOOL, args: {}, session: 'held', at: new Date().toISOString() })
      .then(() => settled.push('c1 started'));
    const second = rec
      .completed(streamsResult('c1', 'held', sha256('m1'), []))
      .then(() => settled.push('c1 completed'));
    // Both lines have reached the writer while the fsync is held, and it issued no write for them.
    await until(() => appended() === 3);
    await nextTurn();
    expect(writes).toEqual([1]);
    expect(await logLines(store, 'held')).toHaveLength(1);
    expect(settled).toEqual([]);
    (gates.shift() as () => void)();
    await first;
    // Both go out in the next batch: one write, one fsync; the started line resolves with the batch.
    await until(() => gates.length === 1);
    expect(writes).toEqual([1, 2]);
    expect(await logLines(store, 'held')).toHaveLength(3);
    expect(settled).toEqual(['c0 completed']);
    (gates.shift() as () => void)();
    await Promise.all([started, second]);
    expect(settled).toEqual(['c0 completed', 'c1 started', 'c1 completed']);
    expect(await rec.stats('held')).toEqual({ appends: 3, syncs: 2 });
    const log = await readEventLog(store, 'held');
    expect(log.corrupt).toBe(0);
    expect(log.records.map((r) => `${r.type} ${'callId' in r ? r.callId : ''}`)).toEqual([
      'call.completed c0',
      'call.started c1',
      'call.completed c1',
    ]);
  });

  it('a failed fsync fails the lines it covered; lines appended while it ran are written after it and commit', async () => {
    const gates: Array<() => void> = [];
    const writes: number[] = [];
    const store = await tempStore({ io: logHooks({ datasync: firstSyncFails(gates), writes }) });
    const rec = recorderFor(store);
    const appended = countAppends();
    const first = outcome(rec.completed(streamsResult('c0', 'eio', sha256('m0'), [])));
    await until(() => gates.length === 1);
    const second = outcome(rec.completed(streamsResult('c1', 'eio', sha256('m1'), [])));
    // c1's line is in the writer before the failing fsync ends, and not written yet.
    await until(() => appended() === 2);
    await nextTurn();
    expect(writes).toEqual([1]);
    (gates.shift() as () => void)();
    expect(await first).toBe('EDISK');
    // Written only after the failure was reported: its own write dirtied its pages, the next fsync confirms it.
    expect(await second).toBe('ok');
    expect(writes).toEqual([1, 1]);
    expect(await rec.stats('eio')).toEqual({ appends: 2, syncs: 2 });
    expect(await recordIds(store, 'eio')).toEqual(['c0', 'c1']);
    await rec.close();
    expect(await openLogFds(store, 'eio')).toEqual([]);
    await expectNoLeaks(store.root);
  });

  it('closes only after the batches waiting and in flight end; an append after close is ECLOSED', async () => {
    const syncGates: Array<() => void> = [];
    const store = await tempStore({ io: logHooks({ datasync: heldSyncs(syncGates) }) });
    const writer = await EventLogWriter.open(store, 'closing');
    const settled: string[] = [];
    const durable = outcome(writer.append('durable\n', true)).then((o) => settled.push(`durable ${o}`));
    await until(() => syncGates.length === 1);
    // Written, waiting for its fsync: still busy.
    expect(writer.busy).toBe(true);
    const plain = outcome(writer.append('plain\n', false)).then((o) => settled.push(`plain ${o}`));
    const closed = writer.close().then(() => settled.push('closed'));
    expect(await outcome(writer.append('late\n', true))).toBe('ECLOSED');
    (syncGates.shift() as () => void)();
    await Promise.all([durable, plain, closed]);
    expect(settled).toEqual(['durable ok', 'plain ok', 'closed']);
    expect(writer.busy).toBe(false);
    expect(await logLines(store, 'closing')).toEqual(['durable', 'plain']);
    expect(writer.stats).toEqual({ appends: 2, syncs: 1 });
    expect(await openLogFds(store, 'closing')).toEqual([]);
    await expectNoLeaks(store.root);
  });

  it('a datasync that throws synchronously fails its line and the log goes on', async () => {
    // StoreIO is a public seam: a custom one may throw instead of returning a rejected promise.
    let syncs = 0;
    const io: StoreIO = {
      ...realIO,
      datasync: (fh) => {
        if (++syncs === 1) throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
        return realIO.datasync(fh);
      },
    };
    const store = await tempStore({ io });
    const writer = await EventLogWriter.open(store, 'sync-throw');
    expect(await outcome(writer.append('first\n', true))).toBe('EDISK');
    expect(await outcome(writer.append('second\n', true))).toBe('ok');
    expect(writer.busy).toBe(false);
    expect(writer.stats).toEqual({ appends: 2, syncs: 2 });
    await writer.close();
    expect(await logLines(store, 'sync-throw')).toEqual(['first', 'second']);
    expect(await openLogFds(store, 'sync-throw')).toEqual([]);
    await expectNoLeaks(store.root);
  });
});
