/**
 * A replay streams its calls from a second read of the log, holding only
 * calls whose records are still incomplete. Whatever the interleaving of
 * starts, completions, duplicate records, reverts and corrupt lines, and
 * wherever the log's read chunks fall, it must give exactly the calls, in
 * exactly the order, that folding the whole log gives. How the bug shows if
 * it returns: a replay missing, repeating or reordering calls of sessions
 * whose calls overlapped or were reverted.
 */
import { promises as fsp } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readEventLog } from '../../engine/sessions/log-reader.js';
import { openReplay } from '../../engine/sessions/replay.js';
import { eventLogPath } from '../../engine/sessions/session-id.js';
import { foldSession } from '../../engine/sessions/state.js';
import { tempStore } from '../store/helpers.js';
import { framedLine } from './helpers.js';

const IDS = ['c0', 'c1', 'c2', 'c3', 'c4', 'c5'];

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

        const replay = await openReplay(store, 'p');
        expect(replay.reverted).toBe(folded.calls.length - folded.live.length);
        expect(replay.corruptLines).toBe(log.corrupt);
        const got = [];
        for await (const c of replay.calls()) {
          got.push({
            callId: c.callId,
            interrupted: c.interrupted,
            status: c.result.status,
            display: c.interrupted ? undefined : c.result.display,
            args: c.args,
          });
        }
        expect(got).toEqual(expected);
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
});
