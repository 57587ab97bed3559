/**
 * Bounded previews of one output stream, by the preview rule of the design:
 * the longest prefix of the stream with at most `maxLines` lines and at most
 * `maxBytes` UTF-8 bytes that does not split a code point. Lines follow the
 * shared line rule (store/lines.ts): a final `\n` ends the last line.
 *
 * Streams are bytes (capture is byte-exact); a preview is text. Invalid
 * UTF-8 in the shown prefix decodes to U+FFFD here, and only here: the
 * stream keeps its bytes. Lines are counted on `\n` bytes, which no
 * replacement can hide or create, so offsets are the same in both.
 *
 * The continuation offset is the zero-based index of the first line the
 * preview does not show completely. A line cut by the byte limit is therefore
 * re-read whole, and the preview minus its partial last line, followed by the
 * stream's lines from `offset` on, is exactly the stream: nothing unseen is
 * skipped and nothing is repeated except the cut line.
 */

import { linesOfString } from '../../store/lines.js';
import { BadOptionError } from '../protocol/errors.js';
import { detachString, utf8CompleteEnd, widthAt } from '../protocol/text.js';

/** A bounded preview of one stream. */
export interface Preview {
  /** The shown prefix of the stream. */
  text: string;
  /** UTF-8 size of `text`. */
  bytes: number;
  /** Lines in `text`, by the line rule (`"a\n"` is 1 line, `"a\nb"` is 2). */
  lines: number;
  /** True when `text` is shorter than the whole stream. */
  truncated: boolean;
  /**
   * Zero-based index of the first line not shown completely: the `offset` of
   * the read hint. It equals the number of `\n` in `text` when truncated (a
   * line cut by the byte limit, or whose `\n` was not reached, is re-read
   * whole). When not truncated every line is shown, so it equals `lines`, the
   * line count of the whole stream (a read there returns nothing more).
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

/**
 * Builds the preview of one stream from its chunks, in order, without ever
 * holding more than `maxBytes` bytes of it: it stops copying once the preview
 * is decided (the byte limit is reached or the `maxLines`-th `\n` is seen).
 * Chunk boundaries may fall anywhere, including inside a code point.
 */
export class PreviewBuilder {
  /** The line limit. */
  readonly maxLines: number;
  /** The byte limit. */
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

  /** Bytes pushed so far, including those not copied. */
  get pushedBytes(): number {
    return this.seen;
  }

  /**
   * True once no further byte can change the preview. Pushing more is still
   * allowed (and cheap); a caller may instead stop pushing and pass the
   * stream's total size to {@link finish}.
   */
  get full(): boolean {
    return this.done;
  }

  /** Feeds the next chunk of the stream. The chunk is copied as far as needed, never kept. */
  push(chunk: Uint8Array): void {
    this.seen += chunk.length;
    if (this.done || chunk.length === 0) return;
    const room = this.maxBytes - this.used;
    let take = Math.min(room, chunk.length);
    // The maxLines-th newline ends the preview: nothing after it can be shown.
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

  /**
   * The preview of the whole stream, `totalBytes` long (the bytes pushed, or
   * more when the caller stopped pushing once {@link full}). May be called
   * again; it does not consume the builder. Throws RangeError when
   * `totalBytes` is below the bytes pushed, or above them while the builder
   * was not yet full (it would be missing bytes the preview needs).
   */
  finish(totalBytes: number = this.seen): Preview {
    if (!Number.isSafeInteger(totalBytes) || totalBytes < this.seen) {
      throw new RangeError(`stream total ${totalBytes} is smaller than the ${this.seen} bytes pushed`);
    }
    if (totalBytes > this.seen && !this.done) {
      throw new RangeError(
        `stream total ${totalBytes} exceeds the ${this.seen} bytes pushed, and the preview needs more`,
      );
    }
    // Only a cut can end inside a character; at the end of the stream every byte is shown (an
    // incomplete last sequence decodes to U+FFFD, as invalid bytes do: capture is byte-exact).
    const end = this.used < totalBytes ? utf8CompleteEnd(this.buf, this.used) : this.used;
    const text = decoder.decode(this.buf.subarray(0, end));
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes !== end && bytes > this.maxBytes) {
      // Only invalid UTF-8 gets here: replacement characters grew the text.
      // Re-apply the rule to the decoded text so the limits still hold.
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

/**
 * The preview of a stream given whole as a string (a non-streaming
 * completion). Scans only the shown prefix. A lone surrogate counts as the
 * three bytes of U+FFFD it is encoded as.
 */
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
