/**
 * A stalled event subscriber on a call whose live display outgrows every
 * socket buffer (64 MiB of display while writing 128 MiB): its frames wait in
 * a bounded queue, the excess is dropped, and once it reads it gets what was
 * kept, `lagged` events that account for every dropped frame, and the
 * terminal event last. The call is not slowed and the server's peak memory
 * does not grow with the subscriber: keeping its frames instead would add
 * at least the 64 MiB of display to the peak.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { drainRaw, fixture, memoryOf, parseSse, rawSubscribe, resetPeak } from './helpers.js';
import {
  BIG,
  expectGapsAccounted,
  MAX_GROWTH,
  MAX_STALL_GROWTH,
  MiB,
  repeatedDigest,
  serve,
  stopChildren,
} from './stall-support.js';

afterEach(stopChildren);

describe('a stalled subscriber', () => {
  // 128 MiB through a real server: minutes, not seconds, when another suite loads the machine.
  it('a tool flooding its display: the subscriber lags, then gets lagged and the terminal event', {
    timeout: 240_000,
  }, async () => {
    const s = await serve(['--subscriber-queue', '16', '--plugin', fixture('display-flood')]);
    const args = { bytes: BIG / 2, blockSize: 64 * 1024, displayBytes: 32 * 1024 };
    expect((await s.result(await s.start('display-flood', { ...args, bytes: MiB }))).status).toBe('success');
    const before = memoryOf(s.pid);
    const block = Buffer.alloc(64 * 1024, 0x78);
    block[block.length - 1] = 0x0a;
    const expected = repeatedDigest(block, BIG / 2);

    resetPeak(s.pid);
    const base = await s.result(await s.start('display-flood', args));
    const afterBase = memoryOf(s.pid);
    resetPeak(s.pid);
    const id = await s.start('display-flood', args);
    const stalled = await rawSubscribe(s.child.url, `/v1/calls/${id}/events`, s.token);
    const r = await s.result(id);
    const after = memoryOf(s.pid);
    for (const x of [base, r]) {
      expect(x.status).toBe('success');
      expect(x.output).toMatchObject({ kind: 'single', bytes: BIG / 2, digest: expected });
    }
    console.log(
      JSON.stringify({
        floodMs: { alone: base.durationMs, withStalledSubscriber: r.durationMs },
        peakMiB: { before: before.rss / MiB, alone: afterBase.hwm / MiB, withStalledSubscriber: after.hwm / MiB },
      }),
    );
    expect(Math.max(afterBase.hwm, after.hwm) - before.rss).toBeLessThan(MAX_GROWTH);
    expect(after.hwm - afterBase.hwm).toBeLessThan(MAX_STALL_GROWTH);

    const { head, body } = await drainRaw(stalled);
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    const late = parseSse(body);
    const { lagged, dropped } = expectGapsAccounted(late);
    expect(lagged).toBeGreaterThanOrEqual(1);
    expect(dropped).toBeGreaterThan(0);
    // Far less than the 64 MiB of display the tool produced reached this client.
    expect(Buffer.byteLength(body)).toBeLessThan(16 * MiB);
    expect(JSON.parse(late.at(-1)?.data as string).result).toEqual(r);
    s.child.child.kill('SIGTERM');
    expect(await s.child.exited).toBe(143);
  });
});
