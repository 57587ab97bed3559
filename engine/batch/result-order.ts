/** The results of a batch waiting to be returned: in completion order, or in input order (each index once, a null for an item that gives none). */
export class ResultOrder<R> {
  /** Results ready to return, in completion order (unordered batches). */
  private readonly ready: R[] = [];
  /** Results by index (ordered batches); null for an item that gives none (a blank line). */
  private readonly byIndex = new Map<number, R | null>();
  #next = 0;

  constructor(readonly ordered: boolean) {}

  /** The index an ordered batch returns next. */
  get nextIndex(): number {
    return this.#next;
  }

  /** Results ready and not yet taken (unordered batches). */
  get waiting(): number {
    return this.ready.length;
  }

  /** True when nothing is ready to take. */
  get empty(): boolean {
    return this.ready.length === 0 && !this.byIndex.has(this.#next);
  }

  /** Item `index`'s result (null: it gives none). */
  deliver(index: number, r: R | null): void {
    if (this.ordered) this.byIndex.set(index, r);
    else if (r !== null) this.ready.push(r);
  }

  /** The next result to return: null for an item that gives none, undefined when none is ready. */
  take(): R | null | undefined {
    if (!this.ordered) return this.ready.shift();
    if (!this.byIndex.has(this.#next)) return undefined;
    const r = this.byIndex.get(this.#next) ?? null;
    this.byIndex.delete(this.#next);
    this.#next++;
    return r;
  }
}
