/**
 * The sparse line index: (line, byte offset) pairs at line starts, an entry
 * once {@link INDEX_EVERY_LINES} lines or {@link INDEX_EVERY_BYTES} bytes
 * have passed, so a read scans less than that before its page. Written
 * beside the blob as a cache (little-endian):
 *
 *     0   8  magic "SLXIDX01"
 *     8   8  blob bytes (u64)
 *     16  8  blob lines (u64)
 *     24  8  entry count (u64)
 *     32  16*n entries: line (u64), byte offset (u64)
 *
 * Line 0 at offset 0 is implicit. A missing or malformed index is rebuilt,
 * and an entry is trusted only when the byte before it is `\n`.
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
const INDEX_MAGIC = 'SLXIDX01';

import { type NewlineFinder, newlineFinder } from './newline-simd.js';

const LF = 0x0a;
/** Chunks shorter than this are scanned in JavaScript: copying them into the SIMD module's memory would cost more than it saves. */
const SIMD_MIN_BYTES = 256;
/** Below this many bytes per line, counting words beats one indexOf per newline (docs/benchmarks.md, "Line counting"). */
const DENSE_GAP = 24;

/** Counts lines and collects entries, handed out in batches to spill: nothing here grows with the blob. */
export class LineScanner {
  bytes = 0;
  newlines = 0;
  endsWithNewline = false;
  private lastLine = 0;
  private lastOffset = 0;
  private pending: number[] = [];
  private readonly simd: NewlineFinder | undefined;

  /** `simd: false` scans in JavaScript only (the fallback where WebAssembly SIMD is missing; tests compare the two). */
  constructor(options: { simd?: boolean } = {}) {
    this.simd = options.simd === false ? undefined : newlineFinder();
  }

  /** Hot on the capture path: counted in the SIMD finder's memory when available, else in JavaScript. */
  push(chunk: Uint8Array): void {
    const len = chunk.length;
    const f = this.simd;
    if (f === undefined || len < SIMD_MIN_BYTES) {
      this.pushScalar(chunk);
      return;
    }
    const base = this.bytes;
    for (let off = 0; off < len; off += f.capacity) {
      const n = Math.min(f.capacity, len - off);
      f.bytes.set(n === len ? chunk : chunk.subarray(off, off + n), 0);
      this.scanFinder(f, n, base + off);
    }
    this.endsWithNewline = chunk[len - 1] === LF;
    this.bytes = base + len;
  }

  // Counts up to where the next entry is due in one call, then finds that entry's newline, and again.
  private scanFinder(f: NewlineFinder, n: number, base: number): void {
    let p = 0;
    while (p < n) {
      const byteDue = this.lastOffset + INDEX_EVERY_BYTES - 1 - base;
      const limit = Math.min(n, Math.max(p, byteDue));
      if (limit > p) {
        const needLines = this.lastLine + INDEX_EVERY_LINES - this.newlines;
        const r = f.nth(p, limit, needLines);
        if (r >= 0) {
          // The needLines-th newline: the line rule's entry (newline() counts it and records it).
          this.newlines += needLines - 1;
          this.newline(base + r + 1);
          p = r + 1;
          continue;
        }
        this.newlines += -1 - r;
        p = limit;
        if (p >= n) return;
      }
      const r = f.nth(p, n, 1);
      if (r < 0) return;
      this.newline(base + r + 1);
      p = r + 1;
    }
  }

  // `indexOf` while lines are long, a word count once short; exact positions only where an entry may fall.
  private pushScalar(chunk: Uint8Array): void {
    const base = this.bytes;
    const len = chunk.length;
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, len);
    let p = 0;
    let found = 0;
    while (p < len) {
      const q = buf.indexOf(LF, p);
      if (q === -1) break;
      this.newline(base + q + 1);
      p = q + 1;
      if (++found >= 32 && p < found * DENSE_GAP) {
        this.scanWords(chunk, p, base);
        break;
      }
    }
    if (len > 0) this.endsWithNewline = chunk[len - 1] === LF;
    this.bytes = base + len;
  }

  /** Records the newline that ends at `start` (the next line's first byte), adding an index entry when due. */
  private newline(start: number): void {
    this.newlines++;
    if (this.newlines - this.lastLine >= INDEX_EVERY_LINES || start - this.lastOffset >= INDEX_EVERY_BYTES) {
      this.pending.push(this.newlines, start);
      this.lastLine = this.newlines;
      this.lastOffset = start;
    }
  }

  /** Counts newlines in `chunk[from..]`, four bytes at a time where aligned. */
  private scanWords(chunk: Uint8Array, from: number, base: number): void {
    const len = chunk.length;
    let i = from;
    const alignedStart = Math.min(len, i + ((4 - ((chunk.byteOffset + i) & 3)) & 3));
    for (; i < alignedStart; i++) if (chunk[i] === LF) this.newline(base + i + 1);
    const words = (len - i) >>> 2;
    if (words > 0) {
      const w32 = new Int32Array(chunk.buffer, chunk.byteOffset + i, words);
      let newlines = this.newlines;
      for (let k = 0; k < words; k++) {
        const x = (w32[k] as number) ^ 0x0a0a0a0a;
        // Exact zero-byte mask of x: bit 8j+7 set where byte j was \n.
        const y = ~(((x & 0x7f7f7f7f) + 0x7f7f7f7f) | x | 0x7f7f7f7f);
        if (y === 0) continue;
        const wordEnd = base + i + k * 4 + 4;
        const count = Math.imul((y >>> 7) & 0x01010101, 0x01010101) >>> 24;
        if (newlines + count - this.lastLine < INDEX_EVERY_LINES && wordEnd - this.lastOffset < INDEX_EVERY_BYTES) {
          newlines += count; // no index entry can fall in this word
          continue;
        }
        // An entry may be due: take the newlines one by one (little-endian: byte j is bits 8j..8j+7).
        this.newlines = newlines;
        for (let j = 0; j < 4; j++) if ((y >>> (8 * j + 7)) & 1) this.newline(wordEnd - 4 + j + 1);
        newlines = this.newlines;
      }
      this.newlines = newlines;
      i += words * 4;
    }
    for (; i < len; i++) if (chunk[i] === LF) this.newline(base + i + 1);
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

  /** Encoded as index-file entries; an entry at the very end of the blob is harmless (reads take it as the end). */
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
