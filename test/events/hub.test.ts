import { setTimeout as sleep, setImmediate as tick } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { EventHub, type LaggedMarker } from '../../engine/events/hub.js';

type Ev = { type: 'started' } | { type: 'delta'; n: number } | { type: 'completed'; status: string };

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const e of it) out.push(e);
  return out;
}

const isLagged = (e: unknown): e is LaggedMarker => (e as { type?: string }).type === 'lagged';

describe('event hub delivery', () => {
  it('delivers events in order and the terminal event last, then ends', async () => {
    const hub = new EventHub<Ev>();
    const sub = hub.subscribe();
    hub.publish({ type: 'started' });
    hub.publish({ type: 'delta', n: 1 });
    hub.close({ type: 'completed', status: 'success' });
    expect(await collect(sub)).toEqual([
      { type: 'started' },
      { type: 'delta', n: 1 },
      { type: 'completed', status: 'success' },
    ]);
    expect(await sub.next()).toEqual({ value: undefined, done: true });
  });

  it('hands an event straight to a subscriber already waiting for one', async () => {
    const hub = new EventHub<Ev>();
    const sub = hub.subscribe();
    const first = sub.next();
    const second = sub.next();
    hub.publish({ type: 'delta', n: 1 });
    hub.publish({ type: 'delta', n: 2 });
    expect(await first).toEqual({ value: { type: 'delta', n: 1 }, done: false });
    expect(await second).toEqual({ value: { type: 'delta', n: 2 }, done: false });
    const third = sub.next();
    hub.close({ type: 'completed', status: 'failed' });
    expect(await third).toEqual({ value: { type: 'completed', status: 'failed' }, done: false });
    expect(sub.pending).toBe(0);
  });

  it('gives every subscriber the same events and the same terminal event', async () => {
    const hub = new EventHub<Ev>();
    const subs = Array.from({ length: 50 }, () => hub.subscribe());
    const results = Promise.all(subs.map(collect));
    for (let n = 0; n < 100; n++) hub.publish({ type: 'delta', n });
    const terminal = { type: 'completed', status: 'success' } as const;
    hub.close(terminal);
    for (const r of await results) {
      expect(r).toHaveLength(101);
      expect(r.at(-1)).toBe(terminal);
      expect(r.slice(0, 100)).toEqual(Array.from({ length: 100 }, (_, n) => ({ type: 'delta', n })));
    }
  });

  it('gives a subscriber that arrives after close just the terminal event', async () => {
    const hub = new EventHub<Ev>();
    hub.publish({ type: 'started' });
    hub.close({ type: 'completed', status: 'cancelled' });
    expect(await collect(hub.subscribe())).toEqual([{ type: 'completed', status: 'cancelled' }]);
    expect(hub.subscriberCount).toBe(0);
  });

  it('does not replay events published before a subscriber joined', async () => {
    const hub = new EventHub<Ev>();
    hub.publish({ type: 'started' });
    const sub = hub.subscribe();
    hub.publish({ type: 'delta', n: 1 });
    hub.close({ type: 'completed', status: 'success' });
    expect(await collect(sub)).toEqual([
      { type: 'delta', n: 1 },
      { type: 'completed', status: 'success' },
    ]);
  });

  it('unsubscribes a subscriber that breaks out of for await', async () => {
    const hub = new EventHub<Ev>();
    const sub = hub.subscribe();
    const other = hub.subscribe();
    expect(hub.subscriberCount).toBe(2);
    hub.publish({ type: 'delta', n: 1 });
    for await (const e of sub) {
      expect(e).toEqual({ type: 'delta', n: 1 });
      break;
    }
    expect(hub.subscriberCount).toBe(1);
    hub.publish({ type: 'delta', n: 2 });
    expect(sub.pending).toBe(0);
    expect(await sub.next()).toEqual({ value: undefined, done: true });
    hub.close({ type: 'completed', status: 'success' });
    expect((await collect(other)).length).toBe(3);
  });

  it('ends a pending next() when the subscriber returns', async () => {
    const hub = new EventHub<Ev>();
    const sub = hub.subscribe();
    const waiting = sub.next();
    await sub.return?.();
    expect(await waiting).toEqual({ value: undefined, done: true });
    expect(hub.subscriberCount).toBe(0);
  });

  it('refuses events after the terminal event, and a second close', () => {
    const hub = new EventHub<Ev>();
    hub.close({ type: 'completed', status: 'success' });
    expect(hub.closed).toBe(true);
    expect(() => hub.publish({ type: 'started' })).toThrow(expect.objectContaining({ code: 'ECLOSED' }));
    expect(() => hub.close({ type: 'completed', status: 'failed' })).toThrow(
      expect.objectContaining({ code: 'ECLOSED' }),
    );
  });

  it('validates the queue limit and defaults it to 1024', () => {
    expect(new EventHub().queueLimit).toBe(1024);
    for (const q of [0, -1, 1.5]) expect(() => new EventHub({ queueLimit: q })).toThrow(RangeError);
  });
});

describe('event hub with a slow subscriber', () => {
  it('drops the pending events of a full queue, sends one lagged marker, then the terminal event', async () => {
    const hub = new EventHub<Ev>({ queueLimit: 4 });
    const sub = hub.subscribe();
    for (let n = 0; n < 10; n++) hub.publish({ type: 'delta', n });
    expect(sub.pending).toBeLessThanOrEqual(4);
    hub.close({ type: 'completed', status: 'success' });
    // 0-3 queued, 4 overflows: 0-3 dropped; 4-7 queued, 8 overflows: 4-7 dropped; 8, 9 remain.
    expect(await collect(sub)).toEqual([
      { type: 'lagged', dropped: 8 },
      { type: 'delta', n: 8 },
      { type: 'delta', n: 9 },
      { type: 'completed', status: 'success' },
    ]);
  });

  it('keeps the terminal event when the queue is full at close', async () => {
    const hub = new EventHub<Ev>({ queueLimit: 2 });
    const sub = hub.subscribe();
    hub.publish({ type: 'delta', n: 0 });
    hub.publish({ type: 'delta', n: 1 });
    hub.close({ type: 'completed', status: 'success' });
    expect(await collect(sub)).toEqual([
      { type: 'delta', n: 0 },
      { type: 'delta', n: 1 },
      { type: 'completed', status: 'success' },
    ]);
  });

  it('resumes after the marker with the events published since', async () => {
    const hub = new EventHub<Ev>({ queueLimit: 3 });
    const sub = hub.subscribe();
    for (let n = 0; n < 4; n++) hub.publish({ type: 'delta', n });
    expect(await sub.next()).toEqual({ value: { type: 'lagged', dropped: 3 }, done: false });
    expect(await sub.next()).toEqual({ value: { type: 'delta', n: 3 }, done: false });
    hub.publish({ type: 'delta', n: 4 });
    expect(await sub.next()).toEqual({ value: { type: 'delta', n: 4 }, done: false });
  });

  it('lags while the producer publishes 100k events at full speed; a fast sibling misses nothing', async () => {
    const hub = new EventHub<Ev>(); // default queue limit: 1024
    const slow = hub.subscribe();
    const fast = hub.subscribe();
    let maxPending = 0;

    let slowSoFar = 0;
    const slowResult = (async () => {
      const got: Array<Ev | LaggedMarker> = [];
      for await (const e of slow) {
        got.push(e);
        slowSoFar++;
        await sleep(1); // a consumer far slower than the producer
      }
      return got;
    })();
    const fastResult = collect(fast);

    // The producer never awaits a subscriber; it yields to the event loop only between batches,
    // like a capture loop between port messages.
    for (let n = 0; n < 100_000; n++) {
      hub.publish({ type: 'delta', n });
      maxPending = Math.max(maxPending, slow.pending);
      if (n % 512 === 511) await tick();
    }
    const terminal = { type: 'completed', status: 'success' } as const;
    hub.close(terminal);
    // What the slow consumer had read when the producer was done: a producer that waited for it would
    // have let it read everything first.
    const slowAtEnd = slowSoFar;

    const slowGot = await slowResult;
    const fastGot = await fastResult;

    expect(maxPending).toBeLessThanOrEqual(1024);
    // The producer finished long before the slow consumer could have read 100k events (at 1 ms each).
    expect(slowAtEnd).toBeLessThan(100_000 / 2);

    expect(fastGot).toHaveLength(100_001);
    expect(fastGot.some(isLagged)).toBe(false);
    expect(fastGot.at(-1)).toBe(terminal);

    const markers = slowGot.filter(isLagged);
    expect(markers.length).toBeGreaterThan(0);
    expect(slowGot.at(-1)).toBe(terminal);
    const deltas = slowGot.filter((e): e is { type: 'delta'; n: number } => e.type === 'delta');
    const dropped = markers.reduce((sum, m) => sum + m.dropped, 0);
    // Every event is accounted for: delivered or counted in a marker.
    expect(deltas.length + dropped).toBe(100_000);
    // Order is kept among what was delivered.
    for (let i = 1; i < deltas.length; i++) {
      expect((deltas[i] as { n: number }).n).toBeGreaterThan((deltas[i - 1] as { n: number }).n);
    }
    expect(deltas.at(-1)?.n).toBe(99_999);
  });
});

describe('EventHub.end', () => {
  it('ends subscriptions without a terminal event after delivering what is queued', async () => {
    const hub = new EventHub<number>({ queueLimit: 8 });
    const sub = hub.subscribe();
    hub.publish(1);
    hub.publish(2);
    hub.end();
    const got: unknown[] = [];
    for await (const e of sub) got.push(e);
    expect(got).toEqual([1, 2]);
    expect(hub.closed).toBe(true);
    expect(() => hub.publish(3)).toThrow(expect.objectContaining({ code: 'ECLOSED' }));
    const late: unknown[] = [];
    for await (const e of hub.subscribe()) late.push(e);
    expect(late).toEqual([]);
  });

  it('finishes a waiting subscriber at once', async () => {
    const hub = new EventHub<number>();
    const sub = hub.subscribe();
    const next = sub.next();
    hub.end();
    await expect(next).resolves.toEqual({ value: undefined, done: true });
  });
});
