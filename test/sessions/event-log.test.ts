import { promises as fsp } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { ToolInfo } from '../../engine/registry.js';
import { readEventLog } from '../../engine/sessions/log-reader.js';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { replaySession } from '../../engine/sessions/replay.js';
import { eventLogPath } from '../../engine/sessions/session-id.js';
import type { StoreFile } from '../../store/file.js';
import { realIO, type StoreIO } from '../../store/io.js';
import type { Store } from '../../store/store.js';
import { heldPins, tempStore } from '../store/helpers.js';
import { blobDigests, framedLine, sha256, streamsResult } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

const TOOL: ToolInfo = {
  name: 'synthetic',
  description: '',
  output: { kind: 'streams', streams: ['out', 'err'] },
  selfPaginating: false,
  isolation: 'shared',
  argsSchema: {},
  module: 'synthetic.mjs',
  source: 'plugin',
};

const recorders: SessionRecorder[] = [];
function recorderFor(store: Store, options = {}): SessionRecorder {
  const r = new SessionRecorder(store, options);
  recorders.push(r);
  return r;
}
afterEach(async () => {
  for (const r of recorders.splice(0)) await r.close();
});

async function recordCalls(store: Store, session: string, n: number): Promise<SessionRecorder> {
  const rec = recorderFor(store);
  for (let i = 0; i < n; i++) {
    await rec.started({ callId: `c${i}`, tool: TOOL, args: { i }, session, at: new Date().toISOString() });
    await rec.completed(
      streamsResult(`c${i}`, session, sha256(`m${i}`), [{ name: 'out', digest: sha256(`o${i}`), bytes: 1, lines: 1 }]),
    );
  }
  return rec;
}

/** The real filesystem, with `before` run ahead of every fdatasync of an event log (it may wait or throw). */
function logSyncs(before: () => Promise<void>): StoreIO {
  const logs = new WeakSet<StoreFile>();
  return {
    ...realIO,
    open: async (path, flags, mode) => {
      const fh = await realIO.open(path, flags, mode);
      if (path.endsWith('events.log')) logs.add(fh);
      return fh;
    },
    datasync: async (fh) => {
      if (logs.has(fh)) await before();
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

async function logLines(store: Store, session: string): Promise<string[]> {
  const text = await fsp.readFile(eventLogPath(store.layout, session), 'utf8');
  return text.split('\n').slice(0, -1);
}

describe('session event log', () => {
  it('writes each record as an xxhash64 checksum, a space and the JSON, one line each', async () => {
    const store = await tempStore();
    await recordCalls(store, 's', 1);
    const lines = await logLines(store, 's');
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      const json = line.slice(17);
      expect(`${line}\n`).toBe(await framedLine(JSON.parse(json)));
    }
    expect(JSON.parse((lines[0] as string).slice(17))).toMatchObject({
      type: 'call.started',
      callId: 'c0',
      tool: 'synthetic',
      args: { i: 0 },
      output: TOOL.output,
    });
    expect(JSON.parse((lines[1] as string).slice(17))).toMatchObject({
      type: 'call.completed',
      callId: 'c0',
      status: 'success',
      complete: true,
    });
  });

  it('skips and counts a torn last line, and the next record starts on a line of its own', async () => {
    const store = await tempStore();
    let rec = await recordCalls(store, 's', 2);
    await rec.close();
    const path = eventLogPath(store.layout, 's');
    const { size } = await fsp.stat(path);
    const last = (await logLines(store, 's')).at(-1) as string;
    // Cut the last record in the middle, as a crash mid-append would.
    await fsp.truncate(path, size - Math.floor(last.length / 2));
    let log = await readEventLog(store, 's');
    expect(log.corrupt).toBe(1);
    expect(log.records.map((r) => r.type)).toEqual(['call.started', 'call.completed', 'call.started']);
    // A new writer ends the torn fragment first, so the next record is not swallowed by it.
    rec = recorderFor(store);
    await rec.completed(streamsResult('c9', 's', sha256('m9'), []));
    log = await readEventLog(store, 's');
    expect(log.corrupt).toBe(1);
    expect(log.records.map((r) => ('callId' in r ? r.callId : ''))).toEqual(['c0', 'c0', 'c1', 'c9']);
    const replay = await replaySession(store, 's');
    expect(replay.corruptLines).toBe(1);
    // c1 lost its terminal record: it replays as interrupted.
    expect(replay.calls.map((c) => [c.callId, c.interrupted])).toEqual([
      ['c0', false],
      ['c1', true],
      ['c9', false],
    ]);
  });

  it('skips and counts a line with a flipped byte; the lines after it still load', async () => {
    const store = await tempStore();
    await recordCalls(store, 's', 3);
    const path = eventLogPath(store.layout, 's');
    const lines = await logLines(store, 's');
    // Flip one byte inside the JSON of the third line (c1's start).
    const offset = (lines[0] as string).length + 1 + (lines[1] as string).length + 1 + 40;
    const buf = await fsp.readFile(path);
    buf[offset] = (buf[offset] as number) ^ 0x01;
    await fsp.writeFile(path, buf);
    const log = await readEventLog(store, 's');
    expect(log.corrupt).toBe(1);
    expect(log.records).toHaveLength(5);
    const replay = await replaySession(store, 's');
    expect(replay.calls.map((c) => c.callId)).toEqual(['c0', 'c1', 'c2']);
    // c1 lost its start record: its result still replays, without arguments.
    expect(replay.calls[1]?.args).toBeUndefined();
    expect(replay.calls[1]?.result.display).toBe('synthetic c1');
    expect(replay.calls[2]?.args).toEqual({ i: 2 });
  });

  it('counts a damaged checksum, a line without a frame and an over-long line as corrupt', async () => {
    const store = await tempStore();
    await recordCalls(store, 's', 1);
    const path = eventLogPath(store.layout, 's');
    const good = await framedLine({ type: 'session.revert', before: 'nothing' });
    await fsp.appendFile(
      path,
      `0000000000000000${good.slice(16)}{"type":"call.started"}\n${'x'.repeat(5 * 1024 * 1024)}\n${good}`,
    );
    const log = await readEventLog(store, 's');
    expect(log.corrupt).toBe(3);
    expect(log.records.map((r) => r.type)).toEqual(['call.started', 'call.completed', 'session.revert']);
  });

  it('loads a record of an older layout, ignoring unknown fields and record types', async () => {
    const store = await tempStore();
    const digest = sha256('old output');
    const lines = [
      // A start record without an output declaration, with a field this version does not know.
      await framedLine({ type: 'call.started', callId: 'old', tool: 'bash', args: { command: 'ls' }, legacyFlag: 1 }),
      // A terminal record without complete, metadata, attachments, messages or timing.
      await framedLine({
        type: 'call.completed',
        callId: 'old',
        status: 'success',
        display: 'listed',
        model: 'a\nb\n',
        output: { kind: 'single', digest, bytes: 4, lines: 2 },
        shadow: { whatever: true },
      }),
      await framedLine({ type: 'session.renamed', to: 'other' }),
    ];
    await fsp.mkdir(`${store.layout.sessions}/legacy`, { recursive: true });
    await fsp.writeFile(eventLogPath(store.layout, 'legacy'), lines.join(''));
    const replay = await replaySession(store, 'legacy');
    expect(replay.skippedLines).toBe(1);
    expect(replay.corruptLines).toBe(0);
    expect(replay.calls).toEqual([
      {
        callId: 'old',
        tool: 'bash',
        args: { command: 'ls' },
        interrupted: false,
        result: {
          callId: 'old',
          tool: 'bash',
          session: 'legacy',
          status: 'success',
          complete: true,
          display: 'listed',
          model: 'a\nb\n',
          output: { kind: 'single', digest, bytes: 4, lines: 2, truncated: false },
          metadata: {},
          attachments: [],
          messages: [],
          startedAt: '',
          durationMs: 0,
        },
      },
    ]);
  });

  it('rejects invalid session ids with EBADARGS', async () => {
    const store = await tempStore();
    const rec = recorderFor(store);
    for (const bad of ['', '.', '..', 'a/b', '../x', 'a b', 'ä', 'x'.repeat(129), 'a\nb']) {
      await expect(rec.started({ callId: 'c', tool: TOOL, args: {}, session: bad, at: '' })).rejects.toMatchObject({
        code: 'EBADARGS',
      });
      await expect(readEventLog(store, bad)).rejects.toMatchObject({ code: 'EBADARGS' });
    }
    await expect(readEventLog(store, 'x'.repeat(128))).rejects.toMatchObject({ code: 'ENOTFOUND' });
    expect(await fsp.readdir(store.layout.sessions)).toEqual([]);
  });

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
    const io = logSyncs(async () => {
      await new Promise<void>((go) => gates.push(go));
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
    const io = logSyncs(async () => {
      const n = ++syncs;
      await new Promise<void>((go) => gates.push(go));
      if (n === 1) throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
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

  it('stores oversized arguments and fields in a spill blob, keeps the line bounded, and replays them', async () => {
    const store = await tempStore();
    const rec = recorderFor(store, { inlineFieldBytes: 1024 });
    const bigArgs = { text: 'a'.repeat(10_000) };
    const result = streamsResult('big', 's', sha256('m'), []);
    result.display = 'd'.repeat(5000);
    result.model = 'm'.repeat(3000);
    await rec.started({ callId: 'big', tool: TOOL, args: bigArgs, session: 's', at: 'now' });
    await rec.completed(result);
    const lines = await logLines(store, 's');
    for (const line of lines) expect(line.length).toBeLessThan(2048);
    const started = JSON.parse((lines[0] as string).slice(17));
    const completed = JSON.parse((lines[1] as string).slice(17));
    expect(started.args).toBeUndefined();
    expect(started.spill.fields).toEqual(['args']);
    expect(completed.spill.fields).toEqual(['display', 'model']);
    expect(await blobDigests(store)).toEqual([started.spill.digest, completed.spill.digest].sort());
    const replay = await replaySession(store, 's');
    expect(replay.calls[0]?.args).toEqual(bigArgs);
    expect(replay.calls[0]?.result.display).toBe(result.display);
    expect(replay.calls[0]?.result.model).toBe(result.model);
    // Pins of the spill blobs were released once the records were in the log.
    expect(await heldPins(store.root)).toEqual([]);
    expect(await fsp.readdir(store.layout.tmp)).toEqual([]);
    // Without its spill blob the call still replays; the missing fields are named.
    await fsp.unlink(store.layout.blobPath(completed.spill.digest));
    const degraded = await replaySession(store, 's');
    expect(degraded.calls[0]?.unavailable).toEqual(['display', 'model']);
    expect(degraded.calls[0]?.args).toEqual(bigArgs);
  });

  it('does not record calls without a session', async () => {
    const store = await tempStore();
    const rec = recorderFor(store);
    await rec.started({ callId: 'c', tool: TOOL, args: {}, at: '' });
    const { session: _s, ...noSession } = streamsResult('c', 'x', sha256('m'), []);
    await rec.completed(noSession);
    expect(await fsp.readdir(store.layout.sessions)).toEqual([]);
  });
});
