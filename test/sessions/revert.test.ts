/**
 * Revert: a session reverted to before a call replays only the calls before
 * it (and those started after the revert); the reverted calls' artifacts stay
 * readable by possession, from any session, until a GC collects them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { readEventLog } from '../../engine/sessions/log-reader.js';
import { closeEngines, engineWith } from '../support/engines.js';
import { ageStore } from './helpers.js';

afterEach(closeEngines);

const HOUR = 60 * 60 * 1000;

describe('revert', () => {
  it('hides the named call and every later one; calls after the revert are live again', async () => {
    const { engine } = await engineWith([]);
    const ids: string[] = [];
    for (const word of ['a', 'b', 'c', 'd']) {
      ids.push((await engine.run('bash', { command: `echo ${word}` }, { session: 'r' })).callId);
    }
    const [a, b, c, d] = ids as [string, string, string, string];
    expect(await engine.revert('r', c)).toEqual({ session: 'r', reverted: [c, d] });
    expect((await engine.replay('r')).calls.map((x) => x.callId)).toEqual([a, b]);
    const e = (await engine.run('bash', { command: 'echo e' }, { session: 'r' })).callId;
    const replayed = await engine.replay('r');
    expect(replayed.calls.map((x) => x.callId)).toEqual([a, b, e]);
    expect(replayed.reverted).toBe(2);
    // Reverting again from b hides b and e, and nothing twice.
    expect(await engine.revert('r', b)).toEqual({ session: 'r', reverted: [b, e] });
    expect((await engine.replay('r')).calls.map((x) => x.callId)).toEqual([a]);
    expect(await engine.sessions()).toMatchObject([
      { id: 'r', calls: 1, reverted: 4, interrupted: 0, corruptLines: 0 },
    ]);
    // The log holds every record; the reverts are records too.
    const types = (await readEventLog(engine.store, 'r')).records.map((x) => x.type);
    expect(types.filter((t) => t === 'session.revert')).toHaveLength(2);
    expect(types.filter((t) => t === 'call.completed')).toHaveLength(5);
  });

  it('fails with ENOTFOUND for a reverted or unknown call, or an unknown session, and appends nothing', async () => {
    const { engine } = await engineWith([]);
    const a = (await engine.run('bash', { command: 'echo a' }, { session: 'r' })).callId;
    await engine.revert('r', a);
    const before = (await readEventLog(engine.store, 'r')).records.length;
    await expect(engine.revert('r', a)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(engine.revert('r', 'no-such-call')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(engine.revert('nobody', a)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(engine.revert('../x', a)).rejects.toMatchObject({ code: 'EBADARGS' });
    expect((await readEventLog(engine.store, 'r')).records).toHaveLength(before);
  });

  it("keeps a reverted call's artifacts readable by possession, from another session, until GC collects them", async () => {
    const { engine } = await engineWith([]);
    const r = await engine.run('bash', { command: 'printf "line %s\\n" 1 2 3' }, { session: 'a' });
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    const uri = `artifact://${r.output.manifest}/stdout`;
    await engine.revert('a', r.callId);
    // Possession is enough: no session, revert or ownership check on artifact reads.
    const page = await engine.read(uri, { session: 'b' });
    expect(page).toMatchObject({ content: 'line 1\nline 2\nline 3\n', totalLines: 3, nextOffset: null });
    // Within the grace period a GC keeps it; reading it from session b did not make it a root.
    expect((await engine.gc()).removed).toBe(0);
    expect((await engine.read(uri)).content).toBe('line 1\nline 2\nline 3\n');
    await ageStore(engine.store, 2 * HOUR);
    const report = await engine.gc();
    expect(report.removed).toBeGreaterThanOrEqual(2);
    await expect(engine.read(uri)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(engine.read(`artifact://${r.output.manifest}`, { session: 'b' })).rejects.toMatchObject({
      code: 'ENOTFOUND',
    });
    // Session b's own read calls replay as they ended; they never held the artifact.
    const b = (await engine.replay('b')).calls.map((c) => [c.result.status, c.result.error?.code]);
    expect(b).toEqual([
      ['success', undefined],
      ['failed', 'ENOTFOUND'],
    ]);
  });
});
