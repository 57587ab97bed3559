/**
 * Batch objects of S3 session records (a real Ceph RGW): group commit makes
 * many records one PUT, what a recorded call costs in requests, and torn or
 * corrupt batches written straight into the bucket are skipped and counted
 * like torn log lines, with the batches after them still read, and so are
 * batches missing before a session's first.
 */
import { DeleteObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import type { TerminalResult } from '../../engine/index.js';
import { deleteSession } from '../../engine/sessions/catalog.js';
import { frameLine, loadHasher } from '../../engine/sessions/frame.js';
import { readEventLog } from '../../engine/sessions/log-reader.js';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { encodeBatch } from '../../engine/sessions/s3-batch.js';
import { s3Service } from '../support/s3.js';
import { costOf, expectNoLeaks, keysUnder, requestsOf, twoHosts, twoStores } from './s3-hosts.js';

const s3 = await s3Service();

describe.runIf(s3)('S3 session batches', () => {
  it('group commit: 100 records appended at once cost 2 PUTs (the first alone, the rest while it was in flight)', async () => {
    const { a, b, prefix, dir } = await twoStores(s3!);
    const recorder = new SessionRecorder(a);
    const cost = await costOf(a, () =>
      Promise.all(Array.from({ length: 100 }, (_, i) => recorder.revert('g', `call-${i}`))),
    );
    expect(cost).toEqual({ puts: 2, gets: 0, heads: 0, lists: 1, deletes: 0 });
    expect(await recorder.stats('g')).toEqual({ appends: 100, syncs: 2 });
    expect(await keysUnder(s3!, `${prefix}/sessions/g/`)).toEqual([
      `${prefix}/sessions/g/000000000000`,
      `${prefix}/sessions/g/000000000001`,
    ]);
    // Every append resolved after its PUT: B reads all 100, in append order, for 1 LIST and 1 GET per batch.
    let records: Awaited<ReturnType<typeof readEventLog>>['records'] = [];
    const read = await costOf(b, async () => {
      records = (await readEventLog(b, 'g')).records;
    });
    expect(read).toEqual({ puts: 0, gets: 2, heads: 0, lists: 1, deletes: 0 });
    expect(records.map((r) => (r.type === 'session.revert' ? r.before : ''))).toEqual(
      Array.from({ length: 100 }, (_, i) => `call-${i}`),
    );
    // Read again with nothing new: one LIST, no GET.
    expect(await costOf(b, () => readEventLog(b, 'g'))).toEqual({ puts: 0, gets: 0, heads: 0, lists: 1, deletes: 0 });
    await recorder.close();
    await expectNoLeaks(dir);
  });

  it('a recorded bash call costs 2 record PUTs, plus 1 LIST the first time a process writes the session', async () => {
    const { a, dir } = await twoHosts(s3!);
    // A call without a session first, so that every call after it finds the same blobs already there (the empty stream).
    await a.run('bash', { command: 'echo zero' });
    const plain = await costOf(a.store, () => a.run('bash', { command: 'echo one' }));
    const first = await costOf(a.store, () => a.run('bash', { command: 'echo two' }, { session: 'c' }));
    const next = await costOf(a.store, () => a.run('bash', { command: 'echo six' }, { session: 'c' }));
    // Records: a started and a completed batch; the blobs cost what a call without a session costs.
    expect(first).toEqual({ ...plain, puts: plain.puts + 2, lists: plain.lists + 1 });
    expect(next).toEqual({ ...plain, puts: plain.puts + 2 });
    expect(requestsOf(a.store).deletes).toBe(0);
    await expectNoLeaks(dir);
  });

  it('skips a truncated batch, a batch with a flipped byte and one cut at its trailer, counting each, and reads the batches after them', async () => {
    const { a, b, prefix, dir } = await twoHosts(s3!);
    const h = await loadHasher();
    const one = await a.run('bash', { command: 'echo one' }, { session: 't' });
    const line = (rec: object) => Buffer.from(frameLine(h, JSON.stringify(rec)));
    const started = (callId: string) =>
      line({ type: 'call.started', callId, tool: 'bash', args: {}, at: one.startedAt });
    const put = (seq: number, body: Buffer) =>
      s3!.client.send(
        new PutObjectCommand({
          Bucket: s3!.bucket,
          Key: `${prefix}/sessions/t/${String(seq).padStart(12, '0')}`,
          Body: body,
        }),
      );
    // Seq 2: cut in the middle of its only line (a torn line). Seq 3: a flipped byte in its line, trailer intact.
    await put(2, encodeBatch(h, [started('torn')]).subarray(0, 40));
    const flipped = encodeBatch(h, [started('flipped')]);
    flipped[30] = (flipped[30] as number) ^ 0x01;
    await put(3, flipped);
    // Seq 4: an intact line whose trailer was cut off: the line counts, and so does the missing trailer.
    const whole = started('partial');
    await put(4, encodeBatch(h, [whole]).subarray(0, whole.length));
    // A's writer finds seq 2 taken and records after the damaged batches.
    const two = await a.run('bash', { command: 'echo two' }, { session: 't' });
    for (const host of [b, a]) {
      const replay = await host.replay('t');
      expect(replay.corruptLines).toBe(3);
      expect(replay.calls.map((c) => [c.callId, c.interrupted])).toEqual([
        [one.callId, false],
        ['partial', true],
        [two.callId, false],
      ]);
      expect(replay.calls[2]?.result).toMatchObject({
        status: 'success',
        model: two.model,
      } satisfies Partial<TerminalResult>);
    }
    expect(await b.sessions()).toMatchObject([{ id: 't', calls: 3, interrupted: 1, corruptLines: 3 }]);
    await expectNoLeaks(dir);
  });

  it('counts a batch deleted behind its back as one corrupt line and reads the rest', async () => {
    const { a, b, prefix, dir } = await twoHosts(s3!);
    const calls = [];
    for (const w of ['one', 'two', 'six']) calls.push(await a.run('bash', { command: `echo ${w}` }, { session: 'h' }));
    // Batch 2 is the second call's start: without it that call is known by its completion only.
    await s3!.client.send(new DeleteObjectCommand({ Bucket: s3!.bucket, Key: `${prefix}/sessions/h/000000000002` }));
    const replay = await b.replay('h');
    expect(replay.corruptLines).toBe(1);
    expect(replay.calls.map((c) => [c.callId, c.result.status])).toEqual(calls.map((c) => [c.callId, 'success']));
    await expectNoLeaks(dir);
  });

  it("counts the batches missing before a session's first as one corrupt line (deleted while a writer held its next number)", async () => {
    const { a, b, prefix, dir } = await twoHosts(s3!);
    await a.run('bash', { command: 'echo one' }, { session: 'd' });
    // B deletes the session; A's writer still holds its next number (2) and records there.
    await deleteSession(b.store, 'd');
    const after = await a.run('bash', { command: 'echo two' }, { session: 'd' });
    expect(await keysUnder(s3!, `${prefix}/sessions/d/`)).toEqual([
      `${prefix}/sessions/d/000000000002`,
      `${prefix}/sessions/d/000000000003`,
    ]);
    for (const host of [b, a]) {
      const replay = await host.replay('d');
      expect(replay.corruptLines).toBe(1);
      expect(replay.calls.map((c) => [c.callId, c.result.status])).toEqual([[after.callId, 'success']]);
    }
    await expectNoLeaks(dir);
  });
});
