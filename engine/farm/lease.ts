/**
 * A delivery of one item to one worker, and the lease that goes with it.
 * The server gives the item to another worker when the lease (the
 * consumer's ack wait) runs out, so a worker renews it while the call runs;
 * a worker that dies or stalls stops renewing and the item moves on. The
 * lease is no guard against a stalled worker that wakes (a late ack of a
 * stale delivery is still accepted): that guard is the fenced result
 * (queue.ts, recordResult).
 */
import type { JsMsg } from '@nats-io/jetstream';
import type { FarmCall } from './records.js';

/** Renewals per ack wait: a third leaves two chances before the lease runs out. */
export const RENEWALS_PER_LEASE = 3;

/** One item handed to this worker. */
export class Delivery {
  /** The batch the item belongs to. */
  readonly batchId: string;
  /** The item's id in its batch. */
  readonly itemId: string;
  /** The call to run. */
  readonly call: FarmCall;
  /** Which delivery of the item this is, from 1. */
  readonly attempt: number;
  /** Deliveries the item may get (the queue's maxAttempts). */
  readonly maxAttempts: number;
  readonly #msg: JsMsg;
  readonly #renewEveryMs: number;
  #settled = false;

  /** @internal Made by FarmQueue.take. */
  constructor(
    msg: JsMsg,
    item: { batchId: string; itemId: string; call: FarmCall },
    bounds: { ackWaitMs: number; maxAttempts: number },
  ) {
    this.#msg = msg;
    this.batchId = item.batchId;
    this.itemId = item.itemId;
    this.call = item.call;
    this.attempt = msg.info.deliveryCount;
    this.maxAttempts = bounds.maxAttempts;
    this.#renewEveryMs = Math.max(1, Math.floor(bounds.ackWaitMs / RENEWALS_PER_LEASE));
  }

  /** Renews the lease now (for a holder that runs its own loop instead of {@link hold}). */
  renew(): void {
    if (this.#settled) return;
    try {
      this.#msg.working();
    } catch {
      // A closed or reconnecting connection: the next renewal, or the lease's end, settles it.
    }
  }

  /**
   * Runs `fn` while renewing the lease, and stops renewing when it ends
   * however it ends. Completing or releasing the delivery is the caller's
   * choice afterwards, once the result is durable.
   */
  async hold<T>(fn: () => Promise<T>): Promise<T> {
    const timer = setInterval(() => this.renew(), this.#renewEveryMs);
    // The call being run keeps the process alive, not its lease.
    timer.unref();
    try {
      return await fn();
    } finally {
      clearInterval(timer);
    }
  }

  /**
   * Acknowledges the item: the queue forgets it. Call it only after its
   * result is recorded. Resolves once the server confirmed (true) or did
   * not answer in time (false: the item may be delivered again, and the
   * fenced result keeps that harmless).
   */
  async complete(): Promise<boolean> {
    this.#settled = true;
    return this.#msg.ackAck().catch(() => false);
  }

  /** Hands the item back for another worker at once, or after `delayMs` (counts as an attempt). */
  release(delayMs?: number): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#msg.nak(delayMs);
  }
}
