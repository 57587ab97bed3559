/**
 * Credit-based backpressure: a producer much faster than the disk never has
 * more than the window in flight between its worker and the capture file,
 * nothing is dropped or reordered, and the digest is of exactly the bytes
 * written.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { realIO } from '../../store/io.js';
import { closeEngines, engineWith, expectStoreClean, floodDigest, hashBlobFile, sleep } from '../support/engines.js';

afterEach(closeEngines);

const WINDOW = 128 * 1024;

describe('backpressure', () => {
  it('a producer much faster than the disk keeps in-flight bytes within the window and loses nothing', async () => {
    // Every write to the capture file is slowed down, so the disk is far slower than the producer.
    let writes = 0;
    const io = {
      ...realIO,
      write: async (...args: Parameters<typeof realIO.write>) => {
        if (++writes % 16 === 0) await sleep(1);
        return realIO.write(...args);
      },
    };
    const { engine } = await engineWith(['flood'], { window: WINDOW, io });
    const bytes = 64 * 1024 * 1024;
    const handle = engine.call('flood', { bytes });
    const r = await handle.result;
    expect(r).toMatchObject({ status: 'success', complete: true });
    expect(r.output).toMatchObject({ kind: 'single', bytes, digest: floodDigest(bytes, 65536) });
    // The producer did outrun the disk (the window filled up), and never went past it.
    expect(handle.maxInFlight).toBeGreaterThan(WINDOW / 2);
    expect(handle.maxInFlight).toBeLessThanOrEqual(WINDOW);
    if (r.output?.kind !== 'single') throw new Error('expected single output');
    expect(await hashBlobFile(engine, r.output.digest)).toBe(r.output.digest);
    await expectStoreClean(engine);
  });

  it('a producer that ignores write() returning false is still bounded by the window', async () => {
    const { engine } = await engineWith(['flood'], { window: WINDOW });
    const bytes = 16 * 1024 * 1024;
    // Odd block size: chunks do not line up with the 64 KiB wire limit.
    const handle = engine.call('flood', { bytes, blockSize: 100_003, ignoreBackpressure: true });
    const r = await handle.result;
    expect(r).toMatchObject({ status: 'success', complete: true });
    expect(r.output).toMatchObject({ kind: 'single', bytes, digest: floodDigest(bytes, 100_003) });
    expect(handle.maxInFlight).toBeLessThanOrEqual(WINDOW);
    await expectStoreClean(engine);
  });

  it('display deltas share the window with output and never enter it', async () => {
    const { engine } = await engineWith(['flood'], { window: WINDOW });
    const bytes = 8 * 1024 * 1024;
    const handle = engine.call('flood', { bytes, display: true });
    const r = await handle.result;
    expect(r.output).toMatchObject({ bytes, digest: floodDigest(bytes, 65536) });
    expect(handle.maxInFlight).toBeLessThanOrEqual(WINDOW);
  });
});
