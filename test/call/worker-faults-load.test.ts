/**
 * Worker faults under load: 200 calls in flight (concurrency 16), shuffled
 * by a seeded PRNG: ordinary bash and JS calls, cancellations (cooperative,
 * of a bash command, of a tool that ignores its signal), worker crashes
 * (process.exit, an uncaught exception), heap exhaustion under a small
 * workerHeapMb, timeouts (the call's timeoutMs and bash's own timeout).
 *
 * Every call must end with exactly one terminal result (one `completed`
 * event per callId on engine.events(), matching what its handle returned)
 * with the status and code its kind implies; every published output must
 * verify and read back; no child process may be left (pgrep on a marker
 * unique to this run), nothing in tmp/ or pins/, and after engine.close()
 * no worker thread.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { CallEvent, TerminalResult } from '../../engine/result.js';
import {
  closeEngines,
  engineWith,
  expectPublished,
  expectStoreClean,
  floodDigest,
  pgrep,
  waitNoProcess,
} from '../support/engines.js';
import { describeProcesses, rng, sleep, soak, soakTimeout } from '../support/invariants.js';

afterEach(closeEngines);

const SEED = Number(process.env.SLUICE_SEED) || Date.now() % 100_000;
const CALLS = soak(200);
/** Digits no other process on the machine has in its command line: every child process of this test carries them. */
const MARK = `${process.pid}${Math.floor(Math.random() * 1e9)}`;
const LONG_SLEEP = `30.${MARK}`;

type Kind =
  | 'bash'
  | 'echo'
  | 'flood'
  | 'bash-cancel'
  | 'cooperative-cancel'
  | 'crash-exit'
  | 'crash-uncaught'
  | 'oom'
  | 'spin-timeout'
  | 'bash-timeout'
  | 'spin-cancel';

/** How many of each in 200 calls. */
const MIX: Array<[Kind, number]> = [
  ['bash', 62],
  ['echo', 40],
  ['flood', 20],
  ['bash-cancel', 20],
  ['cooperative-cancel', 10],
  ['crash-exit', 10],
  ['crash-uncaught', 10],
  ['oom', 4],
  ['spin-timeout', 8],
  ['bash-timeout', 8],
  ['spin-cancel', 8],
];

interface Planned {
  i: number;
  kind: Kind;
  tool: string;
  args: unknown;
  timeoutMs?: number;
  cancelAfterMs?: number;
}

function plan(random: () => number): Planned[] {
  const kinds: Kind[] = [];
  for (const [k, n] of MIX) for (let j = 0; j < Math.round((n * CALLS) / 200); j++) kinds.push(k);
  for (let j = kinds.length - 1; j > 0; j--) {
    const r = Math.floor(random() * (j + 1));
    [kinds[j], kinds[r]] = [kinds[r] as Kind, kinds[j] as Kind];
  }
  return kinds.map((kind, i): Planned => {
    const cancelAfterMs = Math.floor(random() * 300);
    switch (kind) {
      case 'bash':
        return { i, kind, tool: 'bash', args: { command: `printf 'out ${i}\\n'; printf 'err ${i}\\n' >&2 #${MARK}` } };
      case 'echo':
        return { i, kind, tool: 'echo', args: { text: `echo ${i}\n`, times: 3 } };
      case 'flood':
        return { i, kind, tool: 'flood', args: { bytes: 1024 * 1024 + i } };
      case 'bash-cancel':
        return { i, kind, tool: 'bash', args: { command: `echo started ${i}; sleep ${LONG_SLEEP}` }, cancelAfterMs };
      case 'cooperative-cancel':
        return { i, kind, tool: 'cooperative', args: { sleep: LONG_SLEEP, onAbort: 'throw' }, cancelAfterMs };
      case 'crash-exit':
        return { i, kind, tool: 'crash', args: { how: 'exit', sleep: LONG_SLEEP } };
      case 'crash-uncaught':
        return { i, kind, tool: 'crash', args: { how: 'uncaught', sleep: LONG_SLEEP } };
      case 'oom':
        return { i, kind, tool: 'crash', args: { how: 'oom', sleep: LONG_SLEEP } };
      case 'spin-timeout':
        return { i, kind, tool: 'spin', args: { sleep: LONG_SLEEP }, timeoutMs: 150 + Math.floor(random() * 300) };
      case 'bash-timeout':
        return { i, kind, tool: 'bash', args: { command: `echo t ${i}; sleep ${LONG_SLEEP}`, timeout: 200 } };
      default:
        return { i, kind, tool: 'spin', args: { sleep: LONG_SLEEP }, cancelAfterMs };
    }
  });
}

/** What a call of `kind` must end as. A cancellation that lands after the call ended leaves it as it was. */
function expectOutcome(p: Planned, r: TerminalResult): 'node-bug' | undefined {
  const ctx = `call ${p.i} (${p.kind}): ${JSON.stringify({ status: r.status, error: r.error })}`;
  // Node 20's module loader can fail a fresh worker's import() racing a require() of the same module
  // (ERR_INTERNAL_ASSERTION, nodejs/node#62432): seen about once in ten runs of this test; it fails only
  // that call, as a worker crash, and is counted rather than hidden.
  if (r.error?.code === 'EWORKERCRASH' && r.error.details?.cause === 'ERR_INTERNAL_ASSERTION') return 'node-bug';
  switch (p.kind) {
    case 'bash':
    case 'echo':
    case 'flood':
      expect(r, ctx).toMatchObject({ status: 'success', complete: true });
      return undefined;
    case 'bash-cancel':
    case 'cooperative-cancel':
    case 'spin-cancel':
      expect(r, ctx).toMatchObject({ status: 'cancelled', complete: false, error: { code: 'ECANCELLED' } });
      return undefined;
    case 'crash-exit':
    case 'crash-uncaught':
      expect(r, ctx).toMatchObject({ status: 'failed', complete: false, error: { code: 'EWORKERCRASH' } });
      return undefined;
    case 'oom':
      expect(r, ctx).toMatchObject({
        status: 'failed',
        complete: false,
        error: { code: 'EWORKERCRASH', details: { cause: 'ERR_WORKER_OUT_OF_MEMORY' } },
      });
      return undefined;
    case 'spin-timeout':
    case 'bash-timeout':
      expect(r, ctx).toMatchObject({ status: 'failed', complete: false, error: { code: 'ETIMEOUT' } });
      return undefined;
  }
}

describe('worker faults under load', () => {
  it(
    `${CALLS} calls with cancellations, crashes, heap exhaustion and timeouts each end exactly once, leaving nothing (seed ${SEED})`,
    async () => {
      const { engine } = await engineWith(['echo', 'flood', 'cooperative', 'crash', 'spin'], {
        concurrency: 16,
        workerHeapMb: 32,
        graceMs: 300,
        subscriberQueue: 1_000_000,
      });
      const completed = new Map<string, TerminalResult[]>();
      let lagged = 0;
      const events = engine.events();
      const counting = (async () => {
        for await (const ev of events as AsyncIterable<CallEvent | { type: 'lagged'; dropped: number }>) {
          if (ev.type === 'lagged') lagged++;
          if (ev.type !== 'completed') continue;
          const list = completed.get(ev.callId) ?? [];
          list.push(ev.result);
          completed.set(ev.callId, list);
        }
      })();

      const planned = plan(rng(SEED));
      const t0 = Date.now();
      const handles = planned.map((p) => {
        const h = engine.call(p.tool, p.args, p.timeoutMs === undefined ? {} : { timeoutMs: p.timeoutMs });
        if (p.cancelAfterMs !== undefined && p.cancelAfterMs < 40) {
          // Some are cancelled at once, most likely while still queued for a worker.
          h.cancel('cancelled by the load test before it started');
        } else if (p.cancelAfterMs !== undefined) {
          const cancelAfter = p.cancelAfterMs;
          // Cancel once the call shows it started (or has ended), plus a random delay.
          void (async () => {
            for await (const ev of h.events()) {
              if (ev.type === 'display' || ev.type === 'completed') break;
            }
            await sleep(cancelAfter);
            h.cancel('cancelled by the load test');
          })();
        }
        return h;
      });
      const results = await Promise.all(handles.map((h) => h.result));
      const elapsed = Date.now() - t0;

      // Exactly one terminal result per call, the one its handle returned.
      await sleep(50);
      expect(lagged).toBe(0);
      for (const [i, h] of handles.entries()) {
        expect(completed.get(h.callId)?.length, `call ${i}`).toBe(1);
        expect(completed.get(h.callId)?.[0]).toEqual(results[i]);
      }
      expect(completed.size).toBe(CALLS);

      // Each ended as its kind implies, and whatever it published verifies and reads back.
      let nodeBugs = 0;
      for (const [i, p] of planned.entries()) {
        const r = results[i] as TerminalResult;
        if (r.output !== null) await expectPublished(engine, r.output);
        if (expectOutcome(p, r) === 'node-bug') {
          nodeBugs++;
          continue;
        }
        if (p.kind === 'flood') expect(r.output).toMatchObject({ digest: floodDigest(1024 * 1024 + p.i, 65536) });
        if (p.kind === 'bash') expect(r.model).toContain(`out ${p.i}`);
      }
      expect(nodeBugs).toBeLessThanOrEqual(2);

      // Nothing left: no temporary file or pin, no child process, and the engine still serves.
      await expectStoreClean(engine);
      expect(describeProcesses(await waitNoProcess(MARK, 30_000))).toEqual([]);
      const after = await engine.run('bash', { command: `echo after #${MARK}` });
      expect(after.status).toBe('success');

      await engine.close();
      await counting;
      expect(engine.threads).toBe(0);
      const workers = process.getActiveResourcesInfo().filter((r) => /worker/i.test(r));
      expect(workers).toEqual([]);
      expect(await pgrep(MARK)).toEqual([]);
      // For the record: how long the faulty calls took (printed, never asserted: timing is the bench's job).
      process.stdout.write(`worker faults under load: ${CALLS} calls in ${elapsed} ms (seed ${SEED})\n`);
    },
    soakTimeout(90_000),
  );
});
