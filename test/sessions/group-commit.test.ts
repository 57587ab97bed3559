/**
 * Group commit of a local session log (engine/sessions/log-writer.ts): lines
 * are written in append order while an fsync of earlier ones is in flight,
 * durable lines share fsyncs, and a failed fsync leaves no line confirmed
 * whose bytes it may have lost. The log's writes and fsyncs are real; the
 * tests hold or fail them at chosen points.
 */
import { promises as fsp } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { readEventLog } from '../../engine/sessions/log-reader.js';
import { EventLogWriter } from '../../engine/sessions/log-writer.js';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { eventLogPath } from '../../engine/sessions/session-id.js';
import type { StoreFile } from '../../store/file.js';
import { realIO, type StoreIO } from '../../store/io.js';
import type { Store } from '../../store/store.js';
import { tempStore } from '../store/helpers.js';
import { logLines, sha256, streamsResult, SYNTHETIC_TOOL as TOOL } from './helpers.js';

const recorders: SessionRecorder[] = [];
function recorderFor(store: Store): SessionRecorder {
  const r = new SessionRecorder(store);
  recorders.push(r);
  return r;
}
afterEach(async () => {
  for (const r of recorders.splice(0)) await r.close();
});

/**
 * The real filesystem, with `datasync` run ahead of every fdatasync of an event
 * log and `written` run after each of its writes reached the kernel, before the
 * writer learns it finished (either may wait or throw).
 */
function logHooks(hooks: { datasync?: () => Promise<void>; written?: () => Promise<void> }): StoreIO {
  const logs = new WeakSet<StoreFile>();
  return {
    ...realIO,
    open: async (path, flags, mode) => {
      const fh = await realIO.open(path, flags, mode);
      if (path.endsWith('events.log')) logs.add(fh);
      return fh;
    },
    write: async (fh, buf, off, len, position) => {
      const n = await realIO.write(fh, buf, off, len, position);
      if (logs.has(fh)) await hooks.written?.();
      return n;
    },
    datasync: async (fh) => {
      if (logs.has(fh)) await hooks.datasync?.();
      await realIO.datasync(fh);
    },
  };
}

/** A `datasync` hook: the first fsync waits for the test to let it go, then fails with EIO; later ones pass. */
function firstSyncFails(gates: Array<() => void>): () => Promise<void> {
  let syncs = 0;
  return async () => {
    if (++syncs > 1) return;
    await new Promise<void>((go) => gates.push(go));
    throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
  };
}

/** A `written` hook: while `on`, each write's completion is kept from the writer until the test lets it go. */
function writeHold(): { gates: Array<() => void>; on: boolean; written: () => Promise<void> } {
  const hold = {
    gates: [] as Array<() => void>,
    on: false,
    written: async () => {
      if (hold.on) await new Promise<void>((go) => hold.gates.push(go));
    },
  };
  return hold;
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
    const store = await tempStore();
    const rec = recorderFor(store);
    const n = 64;
    await Promise.all(
      Array.from({ length: n }, (_, i) => rec.completed(streamsResult(`c${i}`, 'busy', sha256(`m${i}`), []))),
    );
    const stats = await rec.stats('busy');
    expect(stats?.appends).toBe(n);
    // Each completion waited for an fsync after its write, but they shared them: the first line goes
    // alone, the others queue meanwhile and go together (one write, one fsync).
    expect(stats?.syncs).toBeGreaterThanOrEqual(1);
    expect(stats?.syncs).toBeLessThanOrEqual(4);
    expect((await readEventLog(store, 'busy')).records).toHaveLength(n);
  });

  it('writes a started line while an fsync is in flight; a durable line written meanwhile waits for the next fsync', async () => {
    // Every fsync of the log waits for the test to let it go; the writes in between are real.
    const gates: Array<() => void> = [];
    const io = logHooks({
      datasync: async () => {
        await new Promise<void>((go) => gates.push(go));
      },
    });
    const store = await tempStore({ io });
    const rec = recorderFor(store);
    const settled: string[] = [];
    const first = rec.completed(streamsResult('c0', 'held', sha256('m0'), [])).then(() => settled.push('c0 completed'));
    await until(() => gates.length === 1);
    // The first fsync is held. A started line is written at once and resolves without any fsync.
    await rec.started({ callId: 'c1', tool: TOOL, args: {}, session: 'held', at: new Date().toISOString() });
    settled.push('c1 started');
    expect(await logLines(store, 'held')).toHaveLength(2);
    // A durable line written now is not covered by the fsync in flight: it waits for the next one.
    const second = rec
      .completed(streamsResult('c1', 'held', sha256('m1'), []))
      .then(() => settled.push('c1 completed'));
    await until(async () => (await logLines(store, 'held')).length === 3);
    expect(gates).toHaveLength(1);
    (gates.shift() as () => void)();
    await first;
    await until(() => gates.length === 1);
    expect(settled).toEqual(['c1 started', 'c0 completed']);
    (gates.shift() as () => void)();
    await second;
    expect(settled).toEqual(['c1 started', 'c0 completed', 'c1 completed']);
    expect(await rec.stats('held')).toEqual({ appends: 3, syncs: 2 });
    const log = await readEventLog(store, 'held');
    expect(log.corrupt).toBe(0);
    expect(log.records.map((r) => `${r.type} ${'callId' in r ? r.callId : ''}`)).toEqual([
      'call.completed c0',
      'call.started c1',
      'call.completed c1',
    ]);
  });

  it('fails the durable lines written while a failed fsync ran; a line written after it commits', async () => {
    // Linux reports a writeback error to one fsync and marks the pages clean: a line written while the
    // failing fsync ran may have been in that writeback, and the next fsync would succeed without it.
    const gates: Array<() => void> = [];
    const io = logHooks({ datasync: firstSyncFails(gates) });
    const store = await tempStore({ io });
    const rec = recorderFor(store);
    const first = outcome(rec.completed(streamsResult('c0', 'eio', sha256('m0'), [])));
    await until(() => gates.length === 1);
    const second = outcome(rec.completed(streamsResult('c1', 'eio', sha256('m1'), [])));
    await until(async () => (await logLines(store, 'eio')).length === 2);
    (gates.shift() as () => void)();
    expect(await first).toBe('EDISK');
    expect(await second).toBe('EDISK');
    // Written after the failure was reported: its own write dirtied its pages, the next fsync confirms it.
    expect(await outcome(rec.completed(streamsResult('c2', 'eio', sha256('m2'), [])))).toBe('ok');
    expect(await rec.stats('eio')).toEqual({ appends: 3, syncs: 2 });
    expect(await recordIds(store, 'eio')).toEqual(['c0', 'c1', 'c2']);
    await rec.close();
    expect(await openLogFds(store, 'eio')).toEqual([]);
  });

  it('fails a durable line whose write was in flight when an fsync failed, and fsyncs nothing for it', async () => {
    const syncGates: Array<() => void> = [];
    // A held write's bytes are in the kernel; the writer has not heard back yet.
    const writes = writeHold();
    const io = logHooks({
      written: writes.written,
      datasync: firstSyncFails(syncGates),
    });
    const store = await tempStore({ io });
    const rec = recorderFor(store);
    const first = outcome(rec.completed(streamsResult('c0', 'mid', sha256('m0'), [])));
    await until(() => syncGates.length === 1);
    writes.on = true;
    const second = outcome(rec.completed(streamsResult('c1', 'mid', sha256('m1'), [])));
    await until(() => writes.gates.length === 1);
    writes.on = false;
    expect(await logLines(store, 'mid')).toHaveLength(2);
    (syncGates.shift() as () => void)();
    expect(await first).toBe('EDISK');
    (writes.gates.shift() as () => void)();
    expect(await second).toBe('EDISK');
    expect(await rec.stats('mid')).toEqual({ appends: 2, syncs: 1 });
    expect(await outcome(rec.completed(streamsResult('c2', 'mid', sha256('m2'), [])))).toBe('ok');
    expect(await rec.stats('mid')).toEqual({ appends: 3, syncs: 2 });
    expect(await recordIds(store, 'mid')).toEqual(['c0', 'c1', 'c2']);
    await rec.close();
    expect(await openLogFds(store, 'mid')).toEqual([]);
  });

  it('closes only after the write and the fsync in flight end; an append after close is ECLOSED', async () => {
    const syncGates: Array<() => void> = [];
    const writes = writeHold();
    const io = logHooks({
      written: writes.written,
      datasync: async () => {
        await new Promise<void>((go) => syncGates.push(go));
      },
    });
    const store = await tempStore({ io });
    const writer = await EventLogWriter.open(store, 'closing');
    const settled: string[] = [];
    const durable = outcome(writer.append('durable\n', true)).then((o) => settled.push(`durable ${o}`));
    await until(() => syncGates.length === 1);
    writes.on = true;
    const plain = outcome(writer.append('plain\n', false)).then((o) => settled.push(`plain ${o}`));
    await until(() => writes.gates.length === 1);
    writes.on = false;
    const closed = writer.close().then(() => settled.push('closed'));
    expect(await outcome(writer.append('late\n', true))).toBe('ECLOSED');
    (writes.gates.shift() as () => void)();
    await plain;
    expect(await openLogFds(store, 'closing')).toHaveLength(1);
    (syncGates.shift() as () => void)();
    await Promise.all([durable, closed]);
    expect(settled).toEqual(['plain ok', 'durable ok', 'closed']);
    expect(writer.busy).toBe(false);
    expect(await logLines(store, 'closing')).toEqual(['durable', 'plain']);
    expect(writer.stats).toEqual({ appends: 2, syncs: 1 });
    expect(await openLogFds(store, 'closing')).toEqual([]);
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
  });
});
