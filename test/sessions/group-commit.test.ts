/**
 * Group commit of a local session log (engine/sessions/log-writer.ts): lines
 * are written in append order while an fsync of earlier ones is in flight,
 * durable lines share fsyncs, and a failed fsync fails the lines it covered. The log's writes and fsyncs are real; the
 * tests hold or fail them at chosen points.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { readEventLog } from '../../engine/sessions/log-reader.js';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
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

/** The real filesystem, with `datasync` run ahead of every fdatasync of an event log (it may wait or throw). */
function logHooks(hooks: { datasync?: () => Promise<void> }): StoreIO {
  const logs = new WeakSet<StoreFile>();
  return {
    ...realIO,
    open: async (path, flags, mode) => {
      const fh = await realIO.open(path, flags, mode);
      if (path.endsWith('events.log')) logs.add(fh);
      return fh;
    },
    datasync: async (fh) => {
      if (logs.has(fh)) await hooks.datasync?.();
      await realIO.datasync(fh);
    },
  };
}

/** Waits until `check` holds (the log's writes and fsyncs run on the thread pool). */
async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; !(await check()); i++) {
    if (i > 2000) throw new Error('condition not reached in 10 s');
    await new Promise((r) => setTimeout(r, 5));
  }
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

  it('fails only the durable lines a failed fsync covered; the lines after it commit', async () => {
    let syncs = 0;
    const gates: Array<() => void> = [];
    const io = logHooks({
      datasync: async () => {
        const n = ++syncs;
        await new Promise<void>((go) => gates.push(go));
        if (n === 1) throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
      },
    });
    const store = await tempStore({ io });
    const rec = recorderFor(store);
    const first = rec.completed(streamsResult('c0', 'eio', sha256('m0'), [])).then(
      () => 'ok',
      (e: { code?: string }) => e.code,
    );
    await until(() => gates.length === 1);
    const second = rec.completed(streamsResult('c1', 'eio', sha256('m1'), [])).then(
      () => 'ok',
      (e: { code?: string }) => e.code,
    );
    await until(async () => (await logLines(store, 'eio')).length === 2);
    (gates.shift() as () => void)();
    expect(await first).toBe('EDISK');
    await until(() => gates.length === 1);
    (gates.shift() as () => void)();
    expect(await second).toBe('ok');
    expect((await readEventLog(store, 'eio')).records.map((r) => ('callId' in r ? r.callId : ''))).toEqual([
      'c0',
      'c1',
    ]);
  });
});
