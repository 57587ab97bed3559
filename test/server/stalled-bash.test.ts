/**
 * A stalled event subscriber (a raw socket that sends its request and then
 * never reads) on a bash call writing 256 MiB: the call completes although
 * the subscriber has read nothing (the tool never waits for it), at the speed
 * of the same call without subscribers; the server's peak memory does not
 * grow with the subscriber; once it reads, it gets its events with every gap
 * announced as `lagged`, and the terminal event last.
 *
 * Run against a `sluice serve` child so the server's own memory (VmHWM, its
 * peak resident set) is measured, not the test runner's.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { drainRaw, memoryOf, parseSse, rawSubscribe, readEvents, resetPeak } from './helpers.js';
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
  it('bash writing 256 MiB: normal speed, bounded server memory, and the terminal event once it reads', {
    timeout: 180_000,
  }, async () => {
    const s = await serve(['--subscriber-queue', '16']);
    expect((await s.result(await s.start('bash', { command: 'echo warm' }))).status).toBe('success');
    const before = memoryOf(s.pid);
    const command = `yes abcdefghijklmnopqrstuvwxyz0123456789 | head -c ${BIG}`;
    const expected = repeatedDigest(Buffer.from('abcdefghijklmnopqrstuvwxyz0123456789\n'), BIG);

    resetPeak(s.pid);
    const base = await s.result(await s.start('bash', { command }));
    const afterBase = memoryOf(s.pid);
    resetPeak(s.pid);
    const id = await s.start('bash', { command });
    const stalled = await rawSubscribe(s.child.url, `/v1/calls/${id}/events`, s.token);
    const reader = readEvents(await s.api(`/v1/calls/${id}/events`));
    const r = await s.result(id);
    const after = memoryOf(s.pid);

    for (const x of [base, r]) {
      expect(x.status).toBe('success');
      const stdout = x.output?.kind === 'streams' ? x.output.streams[0] : undefined;
      expect(stdout).toMatchObject({ name: 'stdout', bytes: BIG, digest: expected });
    }
    console.log(
      JSON.stringify({
        bashMs: { alone: base.durationMs, withStalledSubscriber: r.durationMs },
        peakMiB: { before: before.rss / MiB, alone: afterBase.hwm / MiB, withStalledSubscriber: after.hwm / MiB },
      }),
    );
    // Loose: the machine is shared; the hard evidence is that the call ended while the subscriber read nothing.
    expect(Math.max(afterBase.hwm, after.hwm) - before.rss).toBeLessThan(MAX_GROWTH);
    expect(after.hwm - afterBase.hwm).toBeLessThan(MAX_STALL_GROWTH);

    // A subscriber that reads normally got everything, in order.
    const normal = await reader;
    expect(expectGapsAccounted(normal).lagged).toBe(0);
    const { body } = await drainRaw(stalled);
    const late = parseSse(body);
    expectGapsAccounted(late);
    expect(late.at(-1)?.data).toBe(normal.at(-1)?.data);
    expect(JSON.parse(late.at(-1)?.data as string).result).toEqual(r);
    s.child.child.kill('SIGTERM');
    expect(await s.child.exited).toBe(143);
  });
});
