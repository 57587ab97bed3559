/**
 * A streamed replay (openReplay) keeps only where each call's records are and
 * reads them back one call at a time. Whatever the interleaving of starts,
 * completions, duplicate records, reverts and corrupt lines, and wherever the
 * log's read chunks fall, it must give exactly what replaying from the whole
 * log gives (replaySession, which folds every record). How the bug shows if
 * it returns: a replay missing, repeating or reordering calls of sessions
 * whose calls overlapped or were reverted, or leaving the log open.
 */
import { promises as fsp } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readEventLog } from '../../engine/sessions/log-reader.js';
import { openReplay, replaySession } from '../../engine/sessions/replay.js';
import { eventLogPath } from '../../engine/sessions/session-id.js';
import { foldSession } from '../../engine/sessions/state.js';
import { tempStore } from '../store/helpers.js';
import { framedLine } from './helpers.js';

const IDS = ['c0', 'c1', 'c2', 'c3', 'c4', 'c5'];

/** Descriptors of this process open on `path`. */
async function logDescriptors(path: string): Promise<number> {
  let n = 0;
  for (const fd of await fsp.readdir('/proc/self/fd')) {
    // A deleted file's link reads `<path> (deleted)`.
    const link = await fsp.readlink(`/proc/self/fd/${fd}`).catch(() => '');
    if (link === path || link === `${path} (deleted)`) n++;
  }
  return n;
}

async function writeLog(path: string, lines: string[]): Promise<void> {
  await fsp.writeFile(path, lines.join(''));
}

type Step =
  | { kind: 'start'; id: string }
  | { kind: 'complete'; id: string; status: 'success' | 'failed'; pad: number }
  | { kind: 'revert'; id: string }
  | { kind: 'corrupt' };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('start' as const), id: fc.constantFrom(...IDS) }),
  fc.record({
    kind: fc.constant('complete' as const),
    id: fc.constantFrom(...IDS),
    status: fc.constantFrom('success' as const, 'failed' as const),
    // Up to 300 KB of display: a call's records fall in different 256 KiB reads of the log.
    pad: fc.oneof(fc.nat({ max: 2_000 }), fc.nat({ max: 300_000 })),
  }),
  fc.record({ kind: fc.constant('revert' as const), id: fc.constantFrom(...IDS) }),
  fc.record({ kind: fc.constant('corrupt' as const) }),
);

async function lineFor(v: Step, n: number): Promise<string> {
  if (v.kind === 'start') return framedLine({ type: 'call.started', callId: v.id, tool: 'bash', args: { n } });
  if (v.kind === 'revert') return framedLine({ type: 'session.revert', before: v.id });
  if (v.kind === 'corrupt') return `0000000000000000 {"type":"call.started","callId":"c0"}\n`;
  return framedLine({
    type: 'call.completed',
    callId: v.id,
    status: v.status,
    display: `${v.id} #${n} ${'d'.repeat(v.pad)}`,
    model: `model ${n}`,
    output: null,
  });
}

describe('streamed replay', () => {
  it('gives the calls, in the order, that folding the whole log gives (fast-check)', async () => {
    const store = await tempStore();
    await fsp.mkdir(`${store.layout.sessions}/p`, { recursive: true });
    const path = eventLogPath(store.layout, 'p');
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 40 }), async (steps) => {
        const lines: string[] = [];
        for (let i = 0; i < steps.length; i++) lines.push(await lineFor(steps[i] as Step, i));
        await fsp.writeFile(path, lines.join(''));

        const log = await readEventLog(store, 'p');
        // Every line but the corrupt ones is an intact record of a known layout: the comparison is not vacuous.
        expect(log.records.length).toBe(steps.filter((x) => x.kind !== 'corrupt').length);
        const folded = foldSession(log.records);
        const expected = folded.live.map((e) => ({
          callId: e.callId,
          interrupted: e.completed === undefined,
          status: e.completed?.status ?? 'failed',
          display: e.completed?.display,
          args: e.started?.args,
        }));

        const whole = await replaySession(store, 'p');
        expect(whole.calls.map((c) => c.callId)).toEqual(expected.map((c) => c.callId));
        expect(whole.calls.map((c) => c.args)).toEqual(expected.map((c) => c.args));
        const replay = await openReplay(store, 'p');
        const { calls, close: _close, ...summary } = replay;
        expect(summary).toEqual({
          session: whole.session,
          reverted: whole.reverted,
          corruptLines: whole.corruptLines,
          skippedLines: whole.skippedLines,
        });
        const got = [];
        for await (const c of calls()) got.push(c);
        expect(got).toEqual(whole.calls);
        expect(await logDescriptors(path)).toBe(0);
      }),
      {
        numRuns: 60,
        examples: [
          // A call's completion and its start in different reads of the log, with another call's record
          // across the read boundary between them: the call is whole only once its start is read too.
          [
            [
              { kind: 'complete', id: 'c0', status: 'success', pad: 10 },
              { kind: 'complete', id: 'c1', status: 'failed', pad: 300_000 },
              { kind: 'start', id: 'c0' },
              { kind: 'start', id: 'c1' },
            ],
          ],
        ],
      },
    );
  });

  it('a call that finishes after many others is read back from where its records are, not held with them', async () => {
    const store = await tempStore();
    await fsp.mkdir(`${store.layout.sessions}/long`, { recursive: true });
    const path = eventLogPath(store.layout, 'long');
    const lines = [await lineFor({ kind: 'start', id: 'slow' }, 0)];
    for (let i = 1; i <= 300; i++) {
      lines.push(await lineFor({ kind: 'start', id: `q${i}` }, i));
      lines.push(await lineFor({ kind: 'complete', id: `q${i}`, status: 'success', pad: 1000 }, i));
    }
    lines.push(await lineFor({ kind: 'complete', id: 'slow', status: 'failed', pad: 10 }, 999));
    await writeLog(path, lines);
    const replay = await openReplay(store, 'long');
    const ids: string[] = [];
    for await (const c of replay.calls()) ids.push(`${c.callId}:${c.result.status}`);
    expect(ids).toEqual(['slow:failed', ...Array.from({ length: 300 }, (_, i) => `q${i + 1}:success`)]);
    expect(await logDescriptors(path)).toBe(0);
  });

  it('replays the log it opened even if the session is deleted before the calls are read, and closes it', async () => {
    const store = await tempStore();
    await fsp.mkdir(`${store.layout.sessions}/gone`, { recursive: true });
    const path = eventLogPath(store.layout, 'gone');
    await writeLog(path, [
      await lineFor({ kind: 'start', id: 'a' }, 1),
      await lineFor({ kind: 'complete', id: 'a', status: 'success', pad: 0 }, 2),
    ]);
    const replay = await openReplay(store, 'gone');
    await fsp.rm(`${store.layout.sessions}/gone`, { recursive: true });
    const got = [];
    for await (const c of replay.calls()) got.push([c.callId, c.args, c.result.display]);
    expect(got).toEqual([['a', { n: 1 }, 'a #2 ']]);
    await expect(openReplay(store, 'gone')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await fsp.mkdir(`${store.layout.sessions}/gone`, { recursive: true });
    expect(await logDescriptors(path)).toBe(0);
  });

  it('closes the log when the iteration stops early or never starts', async () => {
    const store = await tempStore();
    await fsp.mkdir(`${store.layout.sessions}/s`, { recursive: true });
    const path = eventLogPath(store.layout, 's');
    const lines = [];
    for (let i = 0; i < 5; i++) {
      lines.push(await lineFor({ kind: 'start', id: `c${i}` }, i));
      lines.push(await lineFor({ kind: 'complete', id: `c${i}`, status: 'success', pad: 0 }, i));
    }
    await writeLog(path, lines);
    const early = await openReplay(store, 's');
    expect(await logDescriptors(path)).toBe(1);
    for await (const c of early.calls()) {
      expect(c.callId).toBe('c0');
      break;
    }
    expect(await logDescriptors(path)).toBe(0);
    const unread = await openReplay(store, 's');
    expect(await logDescriptors(path)).toBe(1);
    await unread.close();
    expect(await logDescriptors(path)).toBe(0);
  });
});
