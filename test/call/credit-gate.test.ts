/**
 * The worker's credit gate on its own: spending within the window needs no
 * promise, a writer without credit waits in order until credit comes back,
 * and closing fails waiters and later acquires with ECANCELLED (or the reason
 * given). The closing error is made only when something needs it: every call
 * closes its gate, and building an error per call was ~1.6% of the workers'
 * CPU in the overhead benchmark's profile (docs/benchmarks.md, "Per-call
 * overhead").
 */
import { describe, expect, it } from 'vitest';
import { CreditGate } from '../../workers/credit.js';

describe('credit gate', () => {
  it('spends credit without a promise while the window has room, then queues writers in order', async () => {
    const gate = new CreditGate(100);
    expect(gate.acquire(60)).toBeUndefined();
    const order: number[] = [];
    const a = gate.acquire(30);
    expect(a).toBeUndefined(); // 90 of 100 spent
    const b = gate.acquire(20)?.then(() => order.push(20));
    const c = gate.acquire(5)?.then(() => order.push(5)); // FIFO: waits behind b though 10 are free
    expect(b).toBeInstanceOf(Promise);
    expect(c).toBeInstanceOf(Promise);
    gate.grant(10); // 20 free: b goes, c still lacks credit
    await b;
    expect(order).toEqual([20]);
    gate.grant(5);
    await c;
    expect(order).toEqual([20, 5]);
  });

  it('a request larger than the window waits for the whole window, not forever', async () => {
    const gate = new CreditGate(64);
    expect(gate.acquire(10)).toBeUndefined();
    let done = false;
    const big = gate.acquire(1000)?.then(() => {
      done = true;
    });
    expect(big).toBeInstanceOf(Promise);
    gate.grant(9); // 63 of 64 free: not yet
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    gate.grant(1);
    await big;
    expect(done).toBe(true);
  });

  it('closing a gate nobody waits on makes later acquires fail with one ECANCELLED, even with credit left', async () => {
    const gate = new CreditGate(64);
    gate.close();
    // Nothing waited, so no error was built yet (the point of making it lazily).
    expect(Reflect.get(gate, 'closedWith')).toBeUndefined();
    const first = gate.acquire(1);
    const second = gate.acquire(1);
    expect(first).toBeInstanceOf(Promise); // not the no-promise fast path: credit is left, but the gate is closed
    const [a, b] = await Promise.all([first?.catch((e: unknown) => e), second?.catch((e: unknown) => e)]);
    expect(a).toMatchObject({ code: 'ECANCELLED' });
    expect(b).toBe(a);
  });

  it('closing without a reason fails waiters and later acquires with ECANCELLED', async () => {
    const gate = new CreditGate(8);
    expect(gate.acquire(8)).toBeUndefined();
    const waiting = gate.acquire(1);
    gate.close();
    await expect(waiting).rejects.toMatchObject({ code: 'ECANCELLED' });
    const later = gate.acquire(1);
    await expect(later).rejects.toMatchObject({ code: 'ECANCELLED' });
    // One error for the gate, not one per acquire.
    expect(await later?.catch((e: unknown) => e)).toBe(await waiting?.catch((e: unknown) => e));
  });

  it('a second close changes nothing: the first reason stays', async () => {
    const gate = new CreditGate(8);
    gate.close();
    gate.close(Object.assign(new Error('later'), { code: 'EPROTOCOL' }));
    await expect(gate.acquire(1)).rejects.toMatchObject({ code: 'ECANCELLED' });
  });

  it('closing with a reason fails waiters and later acquires with that reason', async () => {
    const gate = new CreditGate(8);
    expect(gate.acquire(8)).toBeUndefined();
    const waiting = gate.acquire(4);
    const reason = Object.assign(new Error('worker going away'), { code: 'EPROTOCOL' });
    gate.close(reason);
    await expect(waiting).rejects.toBe(reason);
    await expect(gate.acquire(1)).rejects.toBe(reason);
  });
});
