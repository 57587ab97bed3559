/**
 * The sparse line index: (line number, byte offset) pairs at line starts, so a
 * page deep in a large blob costs O(page), not O(offset).
 *
 * An entry is recorded at the start of a line when at least
 * {@link INDEX_EVERY_LINES} lines or {@link INDEX_EVERY_BYTES} bytes have passed
 * since the previous entry. Between two consecutive entries every line start
 * lies less than that far from the first, so a read scans less than 64 KiB or
 * 1024 lines before its page begins.
 *
 * File format (little-endian), written beside the blob as a cache:
 *
 *     0   8  magic "SLXIDX01"
 *     8   8  blob bytes (u64)
 *     16  8  blob lines (u64)
 *     24  8  entry count (u64)
 *     32  16*n entries: line (u64), byte offset (u64)
 *
 * Line 0 at offset 0 is implicit and never stored. The index is derived data:
 * a missing or malformed one is rebuilt, and every entry is checked against the
 * blob (the byte before it must be `\n`) before it is trusted.
 */

/** Lines between index entries. */
export const INDEX_EVERY_LINES = 1024;
/** Bytes between index entries. */
export const INDEX_EVERY_BYTES = 64 * 1024;
/** Blobs smaller than this get no index file: scanning them is cheaper than one more file. */
export const INDEX_MIN_BLOB_BYTES = 1024 * 1024;
/** Bytes of the header. */
export const INDEX_HEADER_BYTES = 32;
/** Bytes of one entry. */
export const INDEX_ENTRY_BYTES = 16;
/** The magic at the start of an index file. */
export const INDEX_MAGIC = 'SLXIDX01';

const LF = 0x0a;

/**
 * Scans bytes in order, counting lines and collecting index entries. Entries
 * are handed out in batches ({@link takeEntries}) so a caller can spill them to
 * disk; nothing here grows with the blob.
 */
export class LineScanner {
  /** Bytes seen. */
  bytes = 0;
  /** `\n` bytes seen. */
  newlines = 0;
  /** Whether the last byte seen was `\n`. */
  endsWithNewline = false;
  private lastLine = 0;
  private lastOffset = 0;
  private pending: number[] = [];

  /**
   * Feeds the next chunk. Hot on the capture path (it runs on the main thread
   * for every byte of output), so the aligned middle of the chunk is scanned
   * four bytes at a time: a word with no `\n` (the common case) costs a few
   * integer operations instead of four comparisons.
   */
  push(chunk: Uint8Array): void {
    const base = this.bytes;
    const len = chunk.length;
    let newlines = this.newlines;
    let lastLine = this.lastLine;
    let lastOffset = this.lastOffset;
    const pending = this.pending;
    let i = 0;
    const head = Math.min(len, (4 - (chunk.byteOffset & 3)) & 3);
    const words = (len - head) >>> 2;
    const tail = head + words * 4;
    for (;;) {
      // Bytes before the first aligned word, then (second pass) after the last one.
      const stop = i < head ? head : len;
      for (; i < stop; i++) {
        if (chunk[i] !== LF) continue;
        newlines++;
        const start = base + i + 1;
        // Entries only at line starts, and only when enough has passed since the last one.
        if (newlines - lastLine >= INDEX_EVERY_LINES || start - lastOffset >= INDEX_EVERY_BYTES) {
          pending.push(newlines, start);
          lastLine = newlines;
          lastOffset = start;
        }
      }
      if (i >= len) break;
      if (words > 0 && i === head) {
        const w32 = new Uint32Array(chunk.buffer, chunk.byteOffset + head, words);
        for (let k = 0; k < words; k++) {
          // Exact zero-byte mask of (word ^ 0x0a0a0a0a): the high bit of each byte that was \n.
          const x = (w32[k] as number) ^ 0x0a0a0a0a;
          let y = ~(((x & 0x7f7f7f7f) + 0x7f7f7f7f) | x | 0x7f7f7f7f);
          while (y !== 0) {
            const low = y & -y;
            newlines++;
            // Little-endian: bit 8j+7 marks byte j of the word.
            const start = base + head + k * 4 + ((31 - Math.clz32(low)) >>> 3) + 1;
            if (newlines - lastLine >= INDEX_EVERY_LINES || start - lastOffset >= INDEX_EVERY_BYTES) {
              pending.push(newlines, start);
              lastLine = newlines;
              lastOffset = start;
            }
            y ^= low;
          }
        }
        i = tail;
      }
    }
    if (len > 0) this.endsWithNewline = chunk[len - 1] === LF;
    this.newlines = newlines;
    this.lastLine = lastLine;
    this.lastOffset = lastOffset;
    this.bytes = base + len;
  }

  /** Lines so far, by the shared line rule. */
  get lines(): number {
    if (this.bytes === 0) return 0;
    return this.endsWithNewline ? this.newlines : this.newlines + 1;
  }

  /** Number of entries waiting to be taken. */
  get pendingEntries(): number {
    return this.pending.length / 2;
  }

  /**
   * Removes and returns the collected entries, encoded as index-file entries.
   * An entry at the very end of the blob (a start with no line after it) is
   * harmless: reads treat it as the end.
   */
  takeEntries(): Buffer {
    const out = Buffer.allocUnsafe(this.pending.length * 8);
    for (let i = 0; i < this.pending.length; i++) out.writeBigUInt64LE(BigInt(this.pending[i] ?? 0), i * 8);
    this.pending = [];
    return out;
  }
}

/** Encodes an index header. */
export function encodeIndexHeader(bytes: number, lines: number, entries: number): Buffer {
  const h = Buffer.alloc(INDEX_HEADER_BYTES);
  h.write(INDEX_MAGIC, 0, 'latin1');
  h.writeBigUInt64LE(BigInt(bytes), 8);
  h.writeBigUInt64LE(BigInt(lines), 16);
  h.writeBigUInt64LE(BigInt(entries), 24);
  return h;
}

/** A decoded index header, or undefined when `h` is not one. */
export function decodeIndexHeader(h: Buffer): { bytes: number; lines: number; entries: number } | undefined {
  if (h.length < INDEX_HEADER_BYTES || h.toString('latin1', 0, 8) !== INDEX_MAGIC) return undefined;
  return {
    bytes: Number(h.readBigUInt64LE(8)),
    lines: Number(h.readBigUInt64LE(16)),
    entries: Number(h.readBigUInt64LE(24)),
  };
}
