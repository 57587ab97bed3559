/**
 * Calls run concurrently, one worker each: I/O-bound calls do not queue
 * behind each other, and a call that spins forever or crashes takes down only
 * itself while a sibling call succeeds.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  closeEngines,
  engineWith,
  expectStoreClean,
  singleText,
  streamBytes,
  uniqueSleep,
  waitForDisplay,
  waitNoProcess,
} from '../support/engines.js';

afterEach(closeEngines);

describe('concurrency', () => {
  it('8 bash calls run at once: each waits until all 8 are running, and all finish', async () => {
    // A barrier, not a clock: each call announces itself in a directory and waits until all eight
    // have, so the calls can only finish if all eight run at the same time (queued behind each
    // other, the first would give up after its bounded wait and fail). How fast the machine is does
    // not matter.
    const { engine, dir } = await engineWith([], { minThreads: 8 });
    const barrier = join(dir, 'barrier');
    await fsp.mkdir(barrier);
    const command = (i: number) =>
      `touch ${barrier}/${i}; n=0; while [ $(ls ${barrier} | wc -l) -lt 8 ]; do n=$((n+1)); [ $n -gt 1000 ] && exit 7; sleep 0.02; done; echo all`;
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => engine.run('bash', { command: command(i) })));
    for (const r of results) {
      expect(r.status).toBe('success');
      expect((await streamBytes(engine, r)).stdout).toBe('all\n');
    }
    await expectStoreClean(engine);
  });

  it('calls beyond the concurrency limit wait their turn instead of failing', async () => {
    const { engine } = await engineWith([], { concurrency: 2 });
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => engine.run('bash', { command: `sleep 0.1; echo ${i}` })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(5).fill('success'));
    expect(engine.threads).toBeLessThanOrEqual(2);
  });
});

describe('isolation', () => {
  it('a tool spinning forever, once cancelled, affects only its own call', async () => {
    const { engine } = await engineWith(['spin', 'script-single'], { graceMs: 200 });
    const sleeper = uniqueSleep();
    const spinning = engine.call('spin', { sleep: sleeper.seconds });
    await waitForDisplay(spinning, 'ready');
    // While it spins, a sibling call runs to completion on another worker.
    const sibling = await engine.run('script-single', { steps: [{ text: 'sibling ok\n' }] });
    expect(sibling).toMatchObject({ status: 'success', complete: true });
    expect(await singleText(engine, sibling)).toBe('sibling ok\n');
    spinning.cancel();
    const r = await spinning.result;
    expect(r).toMatchObject({ status: 'cancelled', complete: false });
    expect(await singleText(engine, r)).toBe('partial\n');
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    await expectStoreClean(engine);
  });

  it('a worker crash fails only its own call; a concurrent sibling succeeds', async () => {
    const { engine } = await engineWith(['crash'], { workerHeapMb: 32 });
    const sibling = engine.call('bash', { command: 'sleep 0.5; echo sibling' });
    const crashes = await Promise.all(
      (['exit', 'uncaught', 'oom'] as const).map((how) => engine.run('crash', { how })),
    );
    for (const r of crashes) expect(r).toMatchObject({ status: 'failed', error: { code: 'EWORKERCRASH' } });
    const s = await sibling.result;
    expect(s).toMatchObject({ status: 'success', complete: true });
    expect(await streamBytes(engine, s)).toEqual({ stdout: 'sibling\n', stderr: '' });
    await expectStoreClean(engine);
  });
});
