/**
 * The farm queue against a real nats-server (the run's, started by
 * .ci/queue-up.sh): a bounded depth that refuses and loses nothing, leases
 * that run out or are renewed, a bound on attempts, results fenced so that
 * the first stands, and a batch read back or withdrawn.
 */
import { describe, expect, it } from 'vitest';
import { MAX_CALL_BYTES } from '../../engine/farm/index.js';
import { queueService } from '../support/queue.js';
import { FAST, recorded, sleep, urlOf, useQueues } from './helpers.js';

const queue = await queueService();
const call = (n: number) => ({ tool: 'bash', args: { command: `echo ${n}` } });

describe.runIf(queue)('the farm queue', () => {
  const open = useQueues(() => queue!);

  it('at its depth bound a submission is EQUEUEFULL (retryable) and every item queued before is still delivered', async () => {
    const q = await open({ ...FAST, maxDepth: 3 });
    expect(q.bounds.maxDepth).toBe(3);
    for (const i of [1, 2, 3]) await q.submit('b', `i${i}`, call(i));
    await expect(q.submit('b', 'i4', call(4))).rejects.toMatchObject({
      code: 'EQUEUEFULL',
      details: { maxDepth: 3, itemId: 'i4' },
    });
    expect(await q.depth()).toBe(3);
    const taken: string[] = [];
    for (let d = await q.take(); d !== null; d = await q.take()) {
      expect(d.call).toEqual(call(Number(d.itemId.slice(1))));
      taken.push(d.itemId);
      expect(await d.complete()).toBe(true);
    }
    expect(taken).toEqual(['i1', 'i2', 'i3']);
    expect(await q.depth()).toBe(0);
    // Room again: the refused item goes in now.
    expect((await q.submit('b', 'i4', call(4))).duplicate).toBe(false);
  });

  it('a resubmitted item within the duplicate window is dropped; a call over its bound is ERESOURCELIMIT; an empty id is EBADARGS', async () => {
    const q = await open();
    expect((await q.submit('b', 'x', call(1))).duplicate).toBe(false);
    expect((await q.submit('b', 'x', call(1))).duplicate).toBe(true);
    expect(await q.depth()).toBe(1);
    await expect(
      q.submit('b', 'big', { tool: 'bash', args: { command: 'x'.repeat(MAX_CALL_BYTES) } }),
    ).rejects.toMatchObject({
      code: 'ERESOURCELIMIT',
      details: { limit: MAX_CALL_BYTES },
    });
    await expect(q.submit('', 'x', call(1))).rejects.toMatchObject({ code: 'EBADARGS' });
    expect(await q.depth()).toBe(1);
  });

  it('a delivery neither completed nor renewed within its ack wait goes again, as attempt 2', async () => {
    const q = await open();
    await q.submit('b', 'x', call(1));
    const first = await q.take();
    expect(first).toMatchObject({ itemId: 'x', attempt: 1, maxAttempts: 3 });
    const other = await open(FAST, urlOf(q));
    const second = await other.take({ timeoutMs: 3000 });
    expect(second).toMatchObject({ itemId: 'x', attempt: 2 });
    expect(await second!.complete()).toBe(true);
    expect(await q.depth()).toBe(0);
  });

  it('while a holder runs its call the lease is renewed: nobody else gets the item, and once completed it never comes back', async () => {
    const q = await open();
    await q.submit('b', 'x', call(1));
    const mine = await q.take();
    const other = await open(FAST, urlOf(q));
    const [stolen] = await Promise.all([other.take({ timeoutMs: 2500 }), mine!.hold(() => sleep(3000))]);
    expect(stolen).toBeNull();
    expect(await mine!.complete()).toBe(true);
    expect(await other.take({ timeoutMs: 1500 })).toBeNull();
  });

  it('an item whose attempts all end without a result is recorded failed, with its attempts, and not delivered again', async () => {
    const q = await open({ ackWaitMs: 1000, maxAttempts: 2 });
    await q.submit('b', 'x', call(1));
    expect((await q.take())?.attempt).toBe(1);
    const second = await q.take({ timeoutMs: 3000 });
    expect(second?.attempt).toBe(2);
    second!.release();
    // The third delivery is the bookkeeping one: take() records the failure and hands out nothing.
    expect(await q.take({ timeoutMs: 2000 })).toBeNull();
    expect(await q.result('b', 'x')).toMatchObject({ status: 'failed', attempts: 2, error: { code: 'EWORKERCRASH' } });
    expect(await q.depth()).toBe(0);
  });

  it('two workers record the same item: the first result stands, the second gets already-recorded with it', async () => {
    const a = await open({ ...FAST, worker: 'a' });
    const b = await open({ ...FAST, worker: 'b' }, urlOf(a));
    const [ra, rb] = await Promise.all([
      a.recordResult('batch', 'x', { status: 'success', worker: 'a', attempts: 1, output: 'artifact://sha256/aa' }),
      b.recordResult('batch', 'x', { status: 'success', worker: 'b', attempts: 2 }),
    ]);
    const outcomes = [ra.outcome, rb.outcome].sort();
    expect(outcomes).toEqual(['already-recorded', 'recorded']);
    const winner = ra.outcome === 'recorded' ? 'a' : 'b';
    const loser = ra.outcome === 'recorded' ? rb : ra;
    expect(loser).toMatchObject({ outcome: 'already-recorded', existing: { worker: winner } });
    expect(await recorded(a, 'batch')).toEqual(new Map([['x', winner]]));
    // The same worker retrying its own publish is recognised, not refused.
    const again = await (winner === 'a' ? a : b).recordResult('batch', 'x', {
      status: 'success',
      worker: winner,
      attempts: winner === 'a' ? 1 : 2,
      ...(winner === 'a' ? { output: 'artifact://sha256/aa' } : {}),
    });
    expect(again.outcome).toBe('recorded');
  });

  it('an item already recorded is settled by take() without being handed out (a worker that recorded and died before its ack)', async () => {
    const q = await open();
    await q.submit('b', 'x', call(1));
    await q.recordResult('b', 'x', { status: 'success', worker: 'gone', attempts: 1 });
    expect(await q.take({ timeoutMs: 1500 })).toBeNull();
    expect(await q.depth()).toBe(0);
  });

  it("results(batch) gives each recorded item once, then follows new ones; a withdrawn batch's items are settled unrun, other batches' still delivered", async () => {
    const q = await open();
    for (const i of ['a', 'b', 'c']) await q.submit('one', i, call(0));
    await q.submit('two', 'a', call(0));
    await q.recordResult('one', 'a', { status: 'success', worker: 'w', attempts: 1 });
    await q.recordResult('two', 'a', {
      status: 'failed',
      worker: 'w',
      attempts: 1,
      error: { code: 'ETOOLFAILED', message: 'no' },
    });
    expect(await recorded(q, 'one')).toEqual(new Map([['a', 'w']]));
    expect(await recorded(q, 'none')).toEqual(new Map());

    const abort = new AbortController();
    const followed: string[] = [];
    const following = (async () => {
      for await (const r of q.results('one', { follow: true, signal: abort.signal })) {
        followed.push(r.itemId);
        if (followed.length === 2) abort.abort();
      }
    })();
    await q.recordResult('one', 'b', { status: 'success', worker: 'w', attempts: 1 });
    await following;
    expect(followed).toEqual(['a', 'b']);

    await q.withdraw('one');
    expect(await q.isWithdrawn('one')).toBe(true);
    expect(await q.isWithdrawn('two')).toBe(false);
    await q.submit('two', 'b', call(0));
    // Batch one's items are settled unrun on the way; batch two's recorded item too; its new one is handed out.
    const next = await q.take({ timeoutMs: 2000 });
    expect(next).toMatchObject({ batchId: 'two', itemId: 'b', attempt: 1 });
    await next!.complete();
    expect(await q.depth()).toBe(0);
    expect(await q.result('one', 'c')).toBeUndefined();
  });
});
