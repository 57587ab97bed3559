/** The tail of a head+tail preview: a bounded ring of the last bytes, giving whole last lines that start at an exact read offset. */
import { countNewlines, linesOfString } from '../../store/lines.js';

const LF = 0x0a;
/** First allocation: short outputs stay small. */
const INITIAL_CAPACITY = 4096;
const decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/** The tail as the model view shows it. */
export interface TailText {
  /** The shown lines, decoded (invalid UTF-8 as U+FFFD). */
  text: string;
  /** UTF-8 size of `text`. */
  bytes: number;
  /** Lines in `text`. */
  lines: number;
  /** Zero-based index of the tail's first line in the stream: a read offset. */
  startLine: number;
  /** Byte position of the tail's first line in the stream (stored bytes). */
  startByte: number;
}

/** Keeps the last `maxBytes` bytes of a stream, plus the one before them to know whether they start a line. */
export class TailRing {
  /** Most bytes the tail may show. */
  readonly maxBytes: number;
  private readonly capacity: number;
  private buf: Uint8Array;
  /** Bytes pushed in all. */
  private seen = 0;
  /** Where the next byte goes once `buf` is full size (before that, `seen`). */
  private end = 0;

  constructor(maxBytes: number) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) {
      throw new RangeError(`tail maxBytes must be a positive integer, got ${maxBytes}`);
    }
    this.maxBytes = maxBytes;
    this.capacity = maxBytes + 1;
    this.buf = new Uint8Array(Math.min(this.capacity, INITIAL_CAPACITY));
  }

  /** Bytes pushed so far. */
  get pushedBytes(): number {
    return this.seen;
  }

  /** Bytes allocated (never more than `maxBytes + 1`). */
  get allocatedBytes(): number {
    return this.buf.length;
  }

  /** Feeds the next chunk; only its last `maxBytes + 1` bytes can be kept. Copied, never kept. */
  push(chunk: Uint8Array): void {
    let part = chunk;
    if (part.length === 0) return;
    const cap = this.capacity;
    if (this.buf.length < cap) {
      // Filling for the first time (the next byte goes at `seen`): grow, up to the full ring.
      if (this.seen + part.length > this.buf.length) {
        const next = new Uint8Array(Math.min(cap, Math.max(this.seen + part.length, this.buf.length * 2)));
        next.set(this.buf.subarray(0, this.seen));
        this.buf = next;
      }
      this.end = this.seen;
    }
    this.seen += part.length;
    if (part.length >= cap) {
      this.buf.set(part.subarray(part.length - cap), 0);
      this.end = 0;
      return;
    }
    const first = Math.min(part.length, this.buf.length - this.end);
    this.buf.set(part.subarray(0, first), this.end);
    part = part.subarray(first);
    if (part.length > 0) this.buf.set(part, 0);
    this.end = part.length > 0 ? part.length : (this.end + first) % this.buf.length;
  }

  /** The kept bytes in stream order. */
  private ordered(): Uint8Array {
    if (this.seen < this.capacity) return this.buf.subarray(0, this.seen);
    const out = new Uint8Array(this.capacity);
    out.set(this.buf.subarray(this.end), 0);
    out.set(this.buf.subarray(0, this.end), this.capacity - this.end);
    return out;
  }

  /** The most whole last lines within the limits, none before byte `notBefore` (what the head shows whole); undefined when none fits. */
  finish(totalLines: number, maxLines: number, notBefore: number): TailText | undefined {
    const data = this.ordered();
    const regionAbs = this.seen - data.length;
    // The first index of `data` that starts a line.
    let start: number;
    if (regionAbs === 0) start = 0;
    else {
      // data[0] is the byte before the shown region (the ring keeps one more than maxBytes).
      const nl = data.indexOf(LF);
      if (nl === -1) return undefined;
      start = nl + 1;
    }
    while (start < data.length && regionAbs + start < notBefore) {
      const nl = data.indexOf(LF, start);
      if (nl === -1) return undefined;
      start = nl + 1;
    }
    // Too many lines: skip straight to the first line that leaves maxLines (no quadratic rescans).
    let excess = countNewlines(data, start) + (data[data.length - 1] === LF ? 0 : 1) - maxLines;
    while (excess > 0 && start < data.length) {
      const nl = data.indexOf(LF, start);
      if (nl === -1) return undefined;
      start = nl + 1;
      excess--;
    }
    for (;;) {
      if (start >= data.length) return undefined;
      const text = decoder.decode(data.subarray(start));
      const bytes = Buffer.byteLength(text, 'utf8');
      if (bytes <= this.maxBytes) {
        const lines = linesOfString(text);
        return { text, bytes, lines, startLine: totalLines - lines, startByte: regionAbs + start };
      }
      // Invalid UTF-8 grew the text (each stored byte shows as at most 3): any fitting tail starts at
      // least a third of the excess further on, so jump there and on to the next line start.
      const nl = data.indexOf(LF, start + Math.ceil((bytes - this.maxBytes) / 3) - 1);
      if (nl === -1) return undefined;
      start = nl + 1;
    }
  }
}
