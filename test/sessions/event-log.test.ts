import { promises as fsp } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { readEventLog } from '../../engine/sessions/log-reader.js';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { replaySession } from '../../engine/sessions/replay.js';
import { eventLogPath } from '../../engine/sessions/session-id.js';
import type { Store } from '../../store/store.js';
import { heldPins, tempStore } from '../store/helpers.js';
import { blobDigests, framedLine, logLines, sha256, streamsResult, SYNTHETIC_TOOL as TOOL } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

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
