/**
 * Shared helpers for the presentation tests: building previews both ways,
 * the line rule as a list of lines, and the read-back round trip.
 */
import { expect } from 'vitest';
import type { StreamTotals } from '../../engine/presentation/model-view.js';
import { type Preview, PreviewBuilder, previewFromString } from '../../engine/presentation/preview.js';
import { linesOfString } from '../../store/lines.js';

export const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
export const byteLength = (s: string): number => Buffer.byteLength(s, 'utf8');

/** The totals every hint states, for a stream given whole. */
export function totalsOf(content: string | Uint8Array): StreamTotals {
  const bytes = typeof content === 'string' ? utf8(content) : content;
  return { bytes: bytes.length, lines: linesOfString(Buffer.from(bytes).toString('latin1')) };
}

/** Pushes `content` into a builder in chunks of `chunkBytes` bytes (cut anywhere, even inside a code point). */
export function buildPreview(
  content: string | Uint8Array,
  maxLines: number,
  maxBytes: number,
  chunkBytes = 7,
): Preview {
  const bytes = typeof content === 'string' ? utf8(content) : content;
  const b = new PreviewBuilder(maxLines, maxBytes);
  for (let i = 0; i < bytes.length; i += chunkBytes) b.push(bytes.subarray(i, i + chunkBytes));
  return b.finish(bytes.length);
}

/** Both constructions (string, and bytes in several chunkings) agree; returns the preview. */
export function preview(content: string, maxLines: number, maxBytes: number): Preview {
  const fromString = previewFromString(content, maxLines, maxBytes);
  for (const chunk of [1, 2, 3, 5, 64 * 1024]) {
    expect(buildPreview(content, maxLines, maxBytes, chunk)).toEqual(fromString);
  }
  return fromString;
}

/** The stream's lines by the line rule, each with its `\n` (the last may lack one). */
export function linesOf(s: string): string[] {
  const out: string[] = [];
  let start = 0;
  for (let i = s.indexOf('\n'); i !== -1; i = s.indexOf('\n', i + 1)) {
    out.push(s.slice(start, i + 1));
    start = i + 1;
  }
  if (start < s.length) out.push(s.slice(start));
  return out;
}

/**
 * What a reader sees following the hint: the preview without its partial last
 * line, then the stream read from `offset`. Must reproduce the stream.
 */
export function readBack(original: string, p: Preview): string {
  const whole = p.text.slice(0, p.text.lastIndexOf('\n') + 1);
  return whole + linesOf(original).slice(p.offset).join('');
}

/** Asserts the hint offset is truthful: nothing skipped, only the cut line repeated. */
export function expectRoundTrip(original: string, p: Preview): void {
  expect(original.startsWith(p.text)).toBe(true);
  if (!p.truncated) {
    expect(p.text).toBe(original);
    return;
  }
  const lines = linesOf(original);
  const whole = p.text.slice(0, p.text.lastIndexOf('\n') + 1);
  // The fully shown lines are exactly lines[0, offset) ...
  expect(whole).toBe(lines.slice(0, p.offset).join(''));
  // ... the partial rest is a prefix of the line the offset re-reads ...
  expect((lines[p.offset] ?? '').startsWith(p.text.slice(whole.length))).toBe(true);
  // ... and reading on from the offset reproduces the stream.
  expect(readBack(original, p)).toBe(original);
}
