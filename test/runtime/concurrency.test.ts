/**
 * Calls run concurrently, one worker each: I/O-bound calls do not queue
 * behind each other, and a call that spins forever or crashes takes down only
 * itself while a sibling call succeeds.
 */
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
} from './helpers.js';

afterEach(closeEngines);

describe('concurrency', () => {
  it('8 concurrent `sleep 1` bash calls finish in well under 2 s', async () => {
    // Eight warm threads: this checks that I/O-bound calls do not queue behind each other, not how fast
    // a cold thread starts (it loads zod and the runtime, ~0.3 s of CPU each, which bench/ measures).
    const { engine } = await engineWith([], { minThreads: 8 });
    await Promise.all(Array.from({ length: 8 }, () => engine.run('bash', { command: 'sleep 0.3' })));
    const t0 = Date.now();
    const results = await Promise.all(
      Array.from({ length: 8 }, () => engine.run('bash', { command: 'date +%s%3N; sleep 1; date +%s%3N' })),
    );
    const elapsed = Date.now() - t0;
    // Run one after another they would take 8 s; two at a time, 4 s.
    expect(elapsed).toBeLessThan(1900);
    // All eight sleeps were running at one moment: the latest start precedes the earliest end.
    const spans = [];
    for (const r of results) {
      expect(r.status).toBe('success');
      const [start, end] = (await streamBytes(engine, r)).stdout?.trim().split('\n').map(Number) ?? [];
      spans.push({ start: start as number, end: end as number });
    }
    expect(Math.max(...spans.map((s) => s.start))).toBeLessThan(Math.min(...spans.map((s) => s.end)));
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
