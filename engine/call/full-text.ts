/** The whole of a text the worker cut to its bound, written to a blob as it arrives so that the bounded result can say where it is. */
import type { BlobWriter } from '../../store/blob-writer.js';
import type { Pin, Store } from '../../store/store.js';
import type { TextKind } from '../protocol/messages.js';
import type { TextRef } from '../result.js';

/** Most bytes of whole text one call may send (per kind): the size bound of a stream. */
export interface FullTextLimits {
  maxBytes: number;
}

/** Collects the whole texts of one call. */
export class FullTexts {
  private readonly store: Store;
  private readonly maxBytes: number;
  private readonly writers = new Map<TextKind, BlobWriter>();
  /** Kinds whose text passed the bound and is no longer collected. */
  private readonly dropped = new Set<TextKind>();

  constructor(store: Store, limits: FullTextLimits) {
    this.store = store;
    this.maxBytes = limits.maxBytes;
  }

  /** Accepts part of the text of `kind`, settling once written; past a stream's size bound the text is dropped, never the call failed. */
  accept(kind: TextKind, bytes: Uint8Array): Promise<void> {
    if (this.dropped.has(kind)) return Promise.resolve();
    let w = this.writers.get(kind);
    if (!w) {
      w = this.store.writer();
      this.writers.set(kind, w);
    }
    if (w.bytes + bytes.length > this.maxBytes) {
      this.dropped.add(kind);
      this.writers.delete(kind);
      return w.abort();
    }
    return w.write(bytes);
  }

  get any(): boolean {
    return this.writers.size > 0 || this.dropped.size > 0;
  }

  /** Publishes under `pin` each text of the size the worker announced; never throws (a whole text is an extra). */
  async publish(pin: Pin, expected: Partial<Record<TextKind, number>>): Promise<Partial<Record<TextKind, TextRef>>> {
    const kept: Partial<Record<TextKind, TextRef>> = {};
    for (const [kind, w] of this.writers) {
      if (w.bytes !== expected[kind] || w.error !== undefined) {
        await w.abort();
        continue;
      }
      try {
        const info = await w.commit(undefined, pin);
        kept[kind] = { digest: info.digest, bytes: info.bytes };
      } catch {
        // Disk trouble while keeping an extra: the bounded text and its marker still say what was cut.
      }
    }
    this.writers.clear();
    return kept;
  }

  /** Drops every text; temporary files are removed. */
  async discard(): Promise<void> {
    await Promise.all([...this.writers.values()].map((w) => w.abort()));
    this.writers.clear();
  }
}
