/**
 * Live-event fan-out for one call or the whole engine: each subscriber has a
 * bounded queue and the producer never waits, so a slow subscriber can
 * neither slow a tool nor grow memory. A full queue drops its pending events
 * for one {@link LaggedMarker}; the terminal event is never dropped. Nothing
 * authoritative is lost: output lives in the artifacts, and the terminal
 * event carries the final result.
 */
import { ClosedError } from '../protocol/errors.js';

/** Default {@link EventHubOptions.queueLimit}. */
const DEFAULT_QUEUE_LIMIT = 1024;

/** Tells a subscriber that it fell behind and `dropped` events were discarded from its queue. */
export interface LaggedMarker {
  type: 'lagged';
  /** Events discarded since the previous marker (or the start). */
  dropped: number;
}

/** Options of an {@link EventHub}. */
export interface EventHubOptions {
  /** Events a subscriber may have pending before it lags (its memory: this many events, a counter and the terminal event). @default 1024 */
  queueLimit?: number;
}

/** A subscriber's end of an {@link EventHub}: iterate it with `for await`. */
export interface EventSubscription<E> extends AsyncIterableIterator<E | LaggedMarker> {
  /** Events waiting to be read, never more than the hub's `queueLimit` (a marker and the terminal event not counted). */
  readonly pending: number;
}

/** Compact the queue array once this many delivered slots lead it. */
const COMPACT_AFTER = 1024;

type Item<E> = E | LaggedMarker;

/** One subscriber's bounded queue, iterated with `for await`. */
class Subscription<E> implements EventSubscription<E> {
  private items: (E | undefined)[] = [];
  private head = 0;
  private lagged = 0;
  private terminal: { event: E } | undefined;
  private ending = false;
  private finished = false;
  private waiters: Array<(result: IteratorResult<Item<E>, undefined>) => void> = [];

  constructor(
    private readonly limit: number,
    private readonly detach: (sub: Subscription<E>) => void,
  ) {}

  get pending(): number {
    return this.items.length - this.head;
  }

  /** Called by the hub for every published event; O(1), never waits. */
  deliver(event: E): void {
    if (this.finished) return;
    const waiter = this.waiters.shift();
    if (waiter) {
      // A waiter exists only when nothing is queued, so order is kept.
      waiter({ value: event, done: false });
      return;
    }
    if (this.pending >= this.limit) {
      // Drop what is pending, not the newest: the marker then sits exactly where the gap is.
      this.lagged += this.pending;
      this.items = [];
      this.head = 0;
    }
    this.items.push(event);
  }

  /** Called by the hub when it closes: the terminal event comes after everything queued. */
  end(terminal: E): void {
    if (this.finished) return;
    this.terminal = { event: terminal };
    const waiter = this.waiters.shift();
    if (waiter) this.settle(waiter);
  }

  /** Called by the hub when it ends without a terminal event: queued events are still delivered, then done. */
  endQuietly(): void {
    if (this.finished || this.terminal) return;
    this.ending = true;
    if (this.pending === 0 && this.lagged === 0) this.finish();
  }

  next(): Promise<IteratorResult<Item<E>, undefined>> {
    if (this.finished) return Promise.resolve({ value: undefined, done: true });
    if (this.lagged > 0) {
      const dropped = this.lagged;
      this.lagged = 0;
      return Promise.resolve({ value: { type: 'lagged', dropped }, done: false });
    }
    if (this.pending > 0) return Promise.resolve({ value: this.shift(), done: false });
    if (this.terminal) return new Promise((resolve) => this.settle(resolve));
    if (this.ending) {
      this.finish();
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Stops the subscription: `break` out of `for await` ends up here. */
  return(): Promise<IteratorResult<Item<E>, undefined>> {
    this.finish();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** Hands the terminal event to `resolve` and ends the subscription. */
  private settle(resolve: (result: IteratorResult<Item<E>, undefined>) => void): void {
    const event = (this.terminal as { event: E }).event;
    this.finish();
    resolve({ value: event, done: false });
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.items = [];
    this.head = 0;
    this.lagged = 0;
    this.terminal = undefined;
    this.detach(this);
    for (const w of this.waiters.splice(0)) w({ value: undefined, done: true });
  }

  private shift(): E {
    const event = this.items[this.head] as E;
    this.items[this.head] = undefined;
    this.head++;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head >= COMPACT_AFTER && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return event;
  }
}

/** Fans events out to subscribers; `publish` and `close` are synchronous, O(subscribers). */
export class EventHub<E> {
  /** Per-subscriber queue bound. */
  readonly queueLimit: number;
  private readonly subscribers = new Set<Subscription<E>>();
  private terminal: { event: E } | undefined;
  private ended = false;

  constructor(opts: EventHubOptions = {}) {
    const limit = opts.queueLimit ?? DEFAULT_QUEUE_LIMIT;
    if (!Number.isSafeInteger(limit) || limit < 1) {
      throw new RangeError(`event hub queueLimit must be a positive integer, got ${limit}`);
    }
    this.queueLimit = limit;
  }

  /** True once {@link close} or {@link end} was called. */
  get closed(): boolean {
    return this.terminal !== undefined || this.ended;
  }

  /** Subscribers still attached (not finished, not returned). */
  get subscriberCount(): number {
    return this.subscribers.size;
  }

  /** Sends `event` to every current subscriber. Throws {@link ClosedError} after {@link close}. */
  publish(event: E): void {
    if (this.ended) throw new ClosedError('event hub has ended');
    if (this.terminal) throw new ClosedError('event hub is closed: no event can follow the terminal event');
    for (const sub of this.subscribers) sub.deliver(event);
  }

  /** Sends the terminal event, which every subscriber receives last and which is never dropped, and ends the hub. ECLOSED when already closed. */
  close(terminal: E): void {
    if (this.terminal) throw new ClosedError('event hub is already closed');
    this.terminal = { event: terminal };
    const subs = [...this.subscribers];
    this.subscribers.clear();
    for (const sub of subs) sub.end(terminal);
  }

  /** A new subscription: events from now on, a {@link LaggedMarker} where its queue overflowed, the terminal event last; `break` unsubscribes. */
  subscribe(): EventSubscription<E> {
    const sub = new Subscription<E>(this.queueLimit, (s) => this.subscribers.delete(s));
    if (this.terminal) sub.end(this.terminal.event);
    else if (this.ended) sub.endQuietly();
    else this.subscribers.add(sub);
    return sub;
  }

  /** Ends the hub without a terminal event (all of an engine's calls): subscribers get what is queued, then finish. Idempotent. */
  end(): void {
    if (this.ended || this.terminal) return;
    this.ended = true;
    const subs = [...this.subscribers];
    this.subscribers.clear();
    for (const sub of subs) sub.endQuietly();
  }
}
