/**
 * Bounded previews of one stream (docs/presentation.md). Invalid UTF-8
 * decodes to U+FFFD here and only here; lines are counted on `\n` bytes, so
 * offsets agree between the text and the stored bytes.
 */

import { linesOfString } from '../../store/lines.js';
import { BadOptionError } from '../protocol/errors.js';
import { detachString, utf8CompleteEnd, widthAt } from '../protocol/text.js';

/** A bounded preview of one stream. */
export interface Preview {
  text: string;
  /** UTF-8 size of `text`. */
  bytes: number;
  /** Lines in `text`, by the line rule (`"a\n"` is 1 line, `"a\nb"` is 2). */
  lines: number;
  /** True when `text` is shorter than the whole stream. */
  truncated: boolean;
  /**
   * Zero-based index of the first line not shown completely: the read
   * hint's `offset`. When not truncated it equals `lines` (a read there returns nothing more).
   */
  offset: number;
}

const LF = 0x0a;
/** First allocation of the builder's buffer: small outputs stay small. */
const INITIAL_CAPACITY = 4096;

function assertLimit(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new BadOptionError(`preview ${name} must be a positive integer, got ${JSON.stringify(value)}`, {
      option: name,
      value: String(value),
    });
  }
}

function countNewlinesOfString(s: string): number {
  let n = 0;
  for (let i = s.indexOf('\n'); i !== -1; i = s.indexOf('\n', i + 1)) n++;
  return n;
}

function makePreview(text: string, truncated: boolean): Preview {
  const lines = linesOfString(text);
  return {
    text,
    bytes: Buffer.byteLength(text, 'utf8'),
    lines,
    truncated,
    offset: truncated ? countNewlinesOfString(text) : lines,
  };
}

const decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/** Builds a stream's preview from its chunks, holding at most `maxBytes` bytes; chunks may end inside a code point. */
export class PreviewBuilder {
  readonly maxLines: number;
  readonly maxBytes: number;
  private buf: Uint8Array;
  private used = 0;
  private newlines = 0;
  private seen = 0;
  private done = false;

  constructor(maxLines: number, maxBytes: number) {
    assertLimit('maxLines', maxLines);
    assertLimit('maxBytes', maxBytes);
    this.maxLines = maxLines;
    this.maxBytes = maxBytes;
    this.buf = new Uint8Array(Math.min(maxBytes, INITIAL_CAPACITY));
  }

  /** Bytes of the stream copied into the builder (never more than `maxBytes`). */
  get retainedBytes(): number {
    return this.used;
  }

  /** Bytes allocated for the copy (never more than `maxBytes`). */
  get allocatedBytes(): number {
    return this.buf.length;
  }

  /** Where the stream's line `k` starts in the copy; RangeError when the copy holds fewer than `k` newlines. */
  rawLineEnd(k: number): number {
    let at = 0;
    for (let n = 0; n < k; n++) {
      const nl = this.buf.subarray(0, this.used).indexOf(LF, at);
      if (nl === -1) throw new RangeError(`the preview holds fewer than ${k} lines`);
      at = nl + 1;
    }
    return at;
  }

  /** Bytes pushed so far, including those not copied. */
  get pushedBytes(): number {
    return this.seen;
  }

  /** True once no further byte can change the preview: a caller may stop pushing and pass the total to {@link finish}. */
  get full(): boolean {
    return this.done;
  }

  /** Feeds the next chunk of the stream. The chunk is copied as far as needed, never kept. */
  push(chunk: Uint8Array): void {
    this.seen += chunk.length;
    if (this.done || chunk.length === 0) return;
    const room = this.maxBytes - this.used;
    let take = Math.min(room, chunk.length);
    for (let i = 0; i < take; i++) {
      if (chunk[i] === LF && ++this.newlines === this.maxLines) {
        take = i + 1;
        this.done = true;
        break;
      }
    }
    this.ensureCapacity(this.used + take);
    this.buf.set(take === chunk.length ? chunk : chunk.subarray(0, take), this.used);
    this.used += take;
    if (this.used === this.maxBytes) this.done = true;
  }

  /** The preview of the whole stream of `totalBytes` (more than pushed only once {@link full}); repeatable. */
  finish(totalBytes: number = this.seen): Preview {
    if (!Number.isSafeInteger(totalBytes) || totalBytes < this.seen) {
      throw new RangeError(`stream total ${totalBytes} is smaller than the ${this.seen} bytes pushed`);
    }
    if (totalBytes > this.seen && !this.done) {
      throw new RangeError(
        `stream total ${totalBytes} exceeds the ${this.seen} bytes pushed, and the preview needs more`,
      );
    }
    // Only a cut can end inside a character: at the stream's end an incomplete sequence shows as U+FFFD.
    const end = this.used < totalBytes ? utf8CompleteEnd(this.buf, this.used) : this.used;
    const text = decoder.decode(this.buf.subarray(0, end));
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes !== end && bytes > this.maxBytes) {
      // Replacement characters grew invalid UTF-8 past the limit: the rule is applied again to the text.
      const again = previewFromString(text, this.maxLines, this.maxBytes);
      return again.truncated ? again : makePreview(again.text, end < totalBytes);
    }
    return makePreview(text, end < totalBytes);
  }

  private ensureCapacity(n: number): void {
    if (n <= this.buf.length) return;
    const next = new Uint8Array(Math.min(this.maxBytes, Math.max(n, this.buf.length * 2)));
    next.set(this.buf.subarray(0, this.used));
    this.buf = next;
  }
}

/** The preview of a stream given whole as a string; a lone surrogate counts as the three bytes of U+FFFD. */
export function previewFromString(text: string, maxLines: number, maxBytes: number): Preview {
  assertLimit('maxLines', maxLines);
  assertLimit('maxBytes', maxBytes);
  let bytes = 0;
  let newlines = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    const w = widthAt(text, i);
    if (bytes + w.bytes > maxBytes) break;
    bytes += w.bytes;
    i += w.units;
    if (c === LF && ++newlines === maxLines) break;
  }
  if (i === n) return makePreview(text, false);
  return makePreview(detachString(text.slice(0, i)), true);
}
