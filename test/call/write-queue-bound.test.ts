/**
 * A tool that ignores backpressure cannot grow the host: the stream writer
 * refuses further writes once more than max(16 MiB, 4 windows) waits, and
 * the call fails with ERESOURCELIMIT, keeping what was accepted before.
 * A tight display loop costs time linear in what it appends.
 *
 * Regression: a tool writing 3000 MiB without waiting for 'drain' grew the
 * host to 3 GB RSS (Buffers live outside the worker's heap limit).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { writeQueueBound } from '../../workers/context.js';
import { closeEngines, engineWith, expectPoolServes, expectStoreClean } from '../support/engines.js';

afterEach(closeEngines);

const MiB = 1024 * 1024;

describe('a tool that ignores write() returning false', () => {
  it('is refused past the queue bound and fails with ERESOURCELIMIT, its accepted prefix kept', async () => {
    const { engine } = await engineWith(['no-backpressure']);
    const before = process.memoryUsage().arrayBuffers;
    const r = await engine.run('no-backpressure', { mib: 400 });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'ERESOURCELIMIT' } });
    expect(r.error?.details).toMatchObject({ stream: 'output', bound: writeQueueBound(1024 * 1024) });
    // What reached the store is what was queued before the refusal: about the bound, never the 400 MiB.
    if (r.output?.kind !== 'single') throw new Error('expected single output');
    expect(r.output.bytes).toBeLessThanOrEqual(writeQueueBound(1024 * 1024) + 2 * MiB);
    expect(r.output.bytes).toBeGreaterThan(0);
    // Nothing of the refused writes is held on: the buffers the host keeps grow by far less than was written.
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(100 * MiB);
    await expectStoreClean(engine);
    await expectPoolServes(engine);
  });

  it('a tool that writes less than the bound without waiting still succeeds', async () => {
    const { engine } = await engineWith(['no-backpressure']);
    const r = await engine.run('no-backpressure', { mib: 8 });
    expect(r).toMatchObject({ status: 'success', output: { bytes: 8 * MiB } });
  });

  it('a million ctx.display calls in a tight loop finish and the display stays bounded', async () => {
    const { engine } = await engineWith(['no-backpressure']);
    const handle = engine.call('no-backpressure', { mib: 0, displays: 1_000_000 });
    const r = await handle.result;
    expect(r.status).toBe('success');
    // The newest lines survive; the oldest were elided in the worker and again in the engine's bound.
    expect(Buffer.byteLength(handle.liveDisplay)).toBeLessThanOrEqual(engine.options.liveDisplayBytes);
    expect(handle.liveDisplay.endsWith('display line 999999\n')).toBe(true);
  });
});
