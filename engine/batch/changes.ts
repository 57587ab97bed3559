/** A level-free wake-up: whoever awaits {@link Changes.next} is woken by the next {@link Changes.signal}, then looks again at what it waits for. */
export class Changes {
  #waiters: Array<() => void> = [];

  /** Resolves at the next signal. */
  next(): Promise<void> {
    return new Promise<void>((r) => this.#waiters.push(r));
  }

  /** Wakes every waiter. */
  signal(): void {
    const w = this.#waiters;
    this.#waiters = [];
    for (const r of w) r();
  }
}
