/** The `concurrency` bound: a FIFO in front of the pools, since piscina never shares a thread with an abortable task. */

interface Waiter {
  grant: (release: () => void) => void;
  reject: (err: unknown) => void;
  unlink: () => void;
}

/** A counting semaphore with abortable waits. */
export class Admission {
  private running = 0;
  private readonly waiting: Waiter[] = [];

  constructor(private readonly limit: number) {}

  get active(): number {
    return this.running;
  }

  get queued(): number {
    return this.waiting.length;
  }

  /** Resolves with a release function once a slot is free; rejects with the signal's reason if it aborts first, holding nothing. */
  acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.running < this.limit && this.waiting.length === 0) {
      this.running++;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const i = this.waiting.indexOf(waiter);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(signal?.reason);
      };
      const waiter: Waiter = {
        grant: resolve,
        reject,
        unlink: () => signal?.removeEventListener('abort', onAbort),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  /** Rejects every waiter with `err` (the pool is closing). */
  rejectAll(err: unknown): void {
    for (const w of this.waiting.splice(0)) {
      w.unlink();
      w.reject(err);
    }
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) {
        // The slot passes straight to the next waiter: the count does not change.
        next.unlink();
        next.grant(this.releaser());
      } else this.running--;
    };
  }
}
