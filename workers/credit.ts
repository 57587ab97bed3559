/**
 * Credit-based backpressure, worker side: a sender spends credit before
 * posting; the engine returns it once bytes are on disk, so a call's bytes
 * in flight never exceed the window.
 */
import { CancelledError } from '../engine/protocol/errors.js';

/** A byte-credit account with FIFO waiters. */
export class CreditGate {
  private credit: number;
  /** The window this gate was opened with. */
  readonly window: number;
  private readonly waiters: Array<{ n: number; resolve: () => void; reject: (e: unknown) => void }> = [];
  /** Why the gate closed; made on first need (its stack costs every call, docs/benchmarks.md). */
  private closedWith: unknown;
  private closed = false;

  constructor(window: number) {
    this.window = window;
    this.credit = window;
  }

  /** Waits until `n` bytes (at most the window) of credit are available, then spends them. */
  acquire(n: number): Promise<void> | undefined {
    if (this.closed) return Promise.reject(this.reason());
    const need = Math.min(n, this.window);
    if (this.waiters.length === 0 && this.credit >= need) {
      this.credit -= need;
      return undefined; // no promise on the fast path: one less allocation per chunk
    }
    return new Promise((resolve, reject) => this.waiters.push({ n: need, resolve, reject }));
  }

  /** Returns credit from the engine. */
  grant(n: number): void {
    this.credit += n;
    while (this.waiters.length > 0) {
      const w = this.waiters[0] as (typeof this.waiters)[number];
      if (this.credit < w.n) break;
      this.credit -= w.n;
      this.waiters.shift();
      w.resolve();
    }
  }

  /** Fails every waiter and later acquire; the CancelledError is made only if anything waits. */
  close(reason?: unknown): void {
    if (this.closed) return;
    this.closed = true;
    this.closedWith = reason;
    for (const w of this.waiters.splice(0)) w.reject(this.reason());
  }

  private reason(): unknown {
    this.closedWith ??= new CancelledError('the call ended');
    return this.closedWith;
  }
}
