/**
 * The line index read forward, a block at a time, by a pass over a blob
 * (the search): the entries after a byte, in order, so the pass knows the
 * line number of a position from the entry before it and the newlines
 * between, without counting every newline of the blob. Entries are checked
 * as they come (strictly increasing, within the blob, at least a byte per
 * line); the pass checks that each one it uses follows a `\n`. The first
 * entry that fails ends the cursor: the pass counts on by itself.
 */

import type { StoreFile } from './file.js';
import { entryAt, type LineAnchor, readExactly, readHeader, wantsIndex } from './index-file.js';
import { isIndexUnavailable, type VerifiedBlob } from './integrity.js';
import { INDEX_ENTRY_BYTES, INDEX_HEADER_BYTES } from './line-index.js';
import type { Store } from './store.js';

/** Entries read at once: 64 KiB of index, some 4 GiB of blob at its densest spacing. */
const BLOCK_ENTRIES = 4096;

/** Entries of one blob's index past a starting line start, handed out up to a byte. */
export class IndexCursor {
  private readonly block = Buffer.allocUnsafe(BLOCK_ENTRIES * INDEX_ENTRY_BYTES);
  /** Entries decoded from `block`, and the next one to hand out. */
  private held = 0;
  private taken = 0;
  /** The next entry of the file to read into `block`. */
  private nextEntry: number;
  private last: LineAnchor;
  private dead = false;
  /** Entries at or before the start, at the head of the first block, are skipped. */
  private readonly skipThrough: number;

  private constructor(
    private readonly fh: StoreFile,
    private readonly entries: number,
    private readonly blob: VerifiedBlob,
    first: number,
    start: LineAnchor,
  ) {
    this.nextEntry = first;
    this.last = start;
    this.skipThrough = start.byte;
  }

  /**
   * A cursor at the first entry after `start` (a line start the caller
   * knows), or undefined when the blob has no usable index. Never throws.
   */
  static async open(store: Store, blob: VerifiedBlob, start: LineAnchor): Promise<IndexCursor | undefined> {
    if (!wantsIndex(blob.bytes) || isIndexUnavailable(store, blob.digest)) return undefined;
    let fh: StoreFile | undefined;
    try {
      fh = await store.backend.openIndex(blob.digest);
      if (!fh) return undefined;
      const header = await readHeader(fh, blob.bytes);
      if (!header || header.lines !== blob.lines) {
        await fh.close();
        return undefined;
      }
      // Down to the block holding the first entry past `start.byte`, by a binary search of positioned
      // reads; the entries of that block before it are passed over as it is read.
      const probe = Buffer.alloc(INDEX_ENTRY_BYTES);
      let lo = 0;
      let hi = header.entries;
      while (hi - lo > BLOCK_ENTRIES) {
        const mid = lo + Math.floor((hi - lo) / 2);
        if (!(await readExactly(fh, probe, INDEX_HEADER_BYTES + mid * INDEX_ENTRY_BYTES))) {
          await fh.close();
          return undefined;
        }
        if (entryAt(probe, 0).byte <= start.byte) lo = mid + 1;
        else hi = mid;
      }
      return new IndexCursor(fh, header.entries, blob, lo, start);
    } catch {
      await fh?.close().catch(() => {});
      return undefined;
    }
  }

  /** False once an entry failed its checks or a read failed: nothing more is handed out. */
  get usable(): boolean {
    return !this.dead;
  }

  /** Stops handing out entries (the caller found one that does not follow a `\n`). */
  fail(): void {
    this.dead = true;
  }

  /** The entries with byte at most `byte`, in order, each checked against the one before. */
  async upTo(byte: number): Promise<LineAnchor[]> {
    const out: LineAnchor[] = [];
    while (!this.dead) {
      if (this.taken === this.held && !(await this.refill())) break;
      const e = entryAt(this.block, this.taken * INDEX_ENTRY_BYTES);
      if (e.byte <= this.skipThrough && this.last.byte === this.skipThrough) {
        this.taken++;
        continue;
      }
      if (e.byte > byte) break;
      const prev = this.last;
      if (
        e.line <= prev.line ||
        e.byte <= prev.byte ||
        e.line - prev.line > e.byte - prev.byte ||
        e.line >= this.blob.lines ||
        e.byte >= this.blob.bytes
      ) {
        this.dead = true;
        return [];
      }
      this.taken++;
      this.last = e;
      out.push(e);
    }
    return out;
  }

  private async refill(): Promise<boolean> {
    const n = Math.min(BLOCK_ENTRIES, this.entries - this.nextEntry);
    if (n <= 0) return false;
    try {
      const ok = await readExactly(
        this.fh,
        this.block.subarray(0, n * INDEX_ENTRY_BYTES),
        INDEX_HEADER_BYTES + this.nextEntry * INDEX_ENTRY_BYTES,
      );
      if (!ok) throw new Error('short index');
    } catch {
      this.dead = true;
      return false;
    }
    this.nextEntry += n;
    this.held = n;
    this.taken = 0;
    return true;
  }

  /** Closes the index file (idempotent, never throws). */
  async close(): Promise<void> {
    this.dead = true;
    await this.fh.close().catch(() => {});
  }
}
