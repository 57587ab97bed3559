/**
 * Session records shared through an S3 store (a real Ceph RGW): two engines
 * with separate local directories on one bucket prefix act as two hosts.
 * What A records, B replays, lists, reverts, resumes and deletes, and both
 * read the same ordered records when both record into one session.
 */
import { describe, expect, it } from 'vitest';
import type { Engine, TerminalResult } from '../../engine/index.js';
import { deleteSession, listSessionIds } from '../../engine/sessions/catalog.js';
import { readEventLog } from '../../engine/sessions/log-reader.js';
import { s3Service } from '../support/s3.js';
import { expectNoLeaks, keysUnder, twoHosts } from './s3-hosts.js';

const s3 = await s3Service();

/** What of a result must be the same wherever it is replayed. */
function essence(r: TerminalResult) {
  return {
    callId: r.callId,
    status: r.status,
    output: r.output,
    display: r.display,
    model: r.model,
    code: r.error?.code,
  };
}

describe.runIf(s3)('session records on S3, across hosts', () => {
  it('calls recorded on A replay on B with identical results, and B lists the session with the same counts', async () => {
    const { a, b, dir } = await twoHosts(s3!);
    const live = [
      await a.run('bash', { command: 'seq 1 5000' }, { session: 's' }),
      await a.run('bash', { command: 'echo fails >&2; exit 3' }, { session: 's' }),
      await a.run('bash', { command: 'printf "%s\\n" one two' }, { session: 's' }),
    ];
    expect(live.map((r) => r.status)).toEqual(['success', 'failed', 'success']);
    const onB = await b.replay('s');
    expect(onB.calls.map((c) => essence(c.result))).toEqual(live.map(essence));
    expect(onB).toMatchObject({ corruptLines: 0, skippedLines: 0, reverted: 0 });
    // The artifacts the records name read on B too.
    const out = live[0]?.output;
    if (out?.kind !== 'streams') throw new Error('expected streams');
    expect(await b.read(`artifact://${out.manifest}/stdout`, { offset: 4998 })).toMatchObject({
      content: '4999\n5000\n',
    });
    const listed = await b.sessions();
    expect(listed).toMatchObject([{ id: 's', calls: 3, reverted: 0, interrupted: 0, corruptLines: 0 }]);
    expect(listed[0]?.referencedBytes).toBeGreaterThan(0);
    expect(await a.sessions()).toEqual(listed);
    await expectNoLeaks(dir);
  });

  it('A and B recording into one session at once: both read the same ordered records, none lost or doubled', async () => {
    const { a, b } = await twoHosts(s3!);
    const runs = (e: Engine, host: string) =>
      Promise.all(
        Array.from({ length: 8 }, (_, i) => e.run('bash', { command: `echo ${host}${i}` }, { session: 'both' })),
      );
    const [fromA, fromB] = await Promise.all([runs(a, 'a'), runs(b, 'b')]);
    const ids = [...fromA, ...fromB].map((r) => r.callId).sort();
    const onA = await a.replay('both');
    const onB = await b.replay('both');
    expect(onA.calls.map((c) => c.callId)).toEqual(onB.calls.map((c) => c.callId));
    expect(onA.calls.map((c) => c.callId).sort()).toEqual(ids);
    expect(onB.calls.map((c) => essence(c.result))).toEqual(onA.calls.map((c) => essence(c.result)));
    // Every record once: 16 starts and 16 completions, in the same order on both hosts.
    const recA = (await readEventLog(a.store, 'both')).records;
    const recB = (await readEventLog(b.store, 'both')).records;
    expect(recB).toEqual(recA);
    expect(recA.filter((r) => r.type === 'call.started')).toHaveLength(16);
    expect(recA.filter((r) => r.type === 'call.completed')).toHaveLength(16);
  });

  it('a revert on B hides the call on A; a delete on A makes B find no session', async () => {
    const { a, b, prefix, dir } = await twoHosts(s3!);
    const ids: string[] = [];
    for (const w of ['x', 'y', 'z']) ids.push((await a.run('bash', { command: `echo ${w}` }, { session: 'r' })).callId);
    expect(await b.revert('r', ids[1] as string)).toEqual({ session: 'r', reverted: ids.slice(1) });
    expect((await a.replay('r')).calls.map((c) => c.callId)).toEqual(ids.slice(0, 1));
    expect(await a.sessions()).toMatchObject([{ id: 'r', calls: 1, reverted: 2 }]);
    // B has a mirror of the session; A deletes it.
    await deleteSession(a.store, 'r');
    expect(await keysUnder(s3!, `${prefix}/sessions/`)).toEqual([]);
    await expect(b.replay('r')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(a.replay('r')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(deleteSession(b.store, 'r')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    expect(await b.sessions()).toEqual([]);
    expect(await listSessionIds(b.store)).toEqual([]);
    // Recording again under the id starts a new session, which B reads anew.
    const again = await a.run('bash', { command: 'echo again' }, { session: 'r' });
    expect((await b.replay('r')).calls.map((c) => c.callId)).toEqual([again.callId]);
    await expectNoLeaks(dir);
  });

  it('a batch resumed on B skips the ids completed on A and returns their recorded results', async () => {
    const { a, b } = await twoHosts(s3!);
    const items = Array.from({ length: 6 }, (_, i) => ({ id: `i${i}`, tool: 'bash', args: { command: `echo ${i}` } }));
    const first: TerminalResult[] = [];
    for await (const r of a.batch(items.slice(0, 3), { session: 'job' })) if (r.result) first.push(r.result);
    expect(first).toHaveLength(3);
    const second = [];
    for await (const r of b.batch(items, { session: 'job' })) second.push(r);
    second.sort((x, y) => String(x.id).localeCompare(String(y.id)));
    expect(second.map((r) => [r.id, r.resumed ?? false])).toEqual([
      ['i0', true],
      ['i1', true],
      ['i2', true],
      ['i3', false],
      ['i4', false],
      ['i5', false],
    ]);
    for (const r of second.slice(0, 3)) expect(r.result).toEqual(first.find((f) => f.callId === r.id));
    expect((await a.replay('job')).calls.map((c) => c.callId).sort()).toEqual(items.map((i) => i.id));
  });
});
