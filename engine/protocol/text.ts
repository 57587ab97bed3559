/**
 * Cutting text without breaking it: the one place that knows how wide a
 * UTF-16 string is in UTF-8 and where a cut may fall. A string cut never
 * splits a surrogate pair; a byte cut never falls inside a UTF-8 sequence
 * (property-tested in test/protocol/text-cut.property.test.ts).
 */

import { isUtf8 } from 'node:buffer';

const isHigh = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number) => c >= 0xdc00 && c <= 0xdfff;

/** UTF-8 width of the code point at `i` of `s` and the UTF-16 units it takes (a lone surrogate is U+FFFD, 3 bytes). */
export function widthAt(s: string, i: number): { bytes: number; units: number } {
  const c = s.charCodeAt(i);
  if (c < 0x80) return { bytes: 1, units: 1 };
  if (c < 0x800) return { bytes: 2, units: 1 };
  if (isHigh(c) && i + 1 < s.length && isLow(s.charCodeAt(i + 1))) return { bytes: 4, units: 2 };
  return { bytes: 3, units: 1 };
}

/** The end (a UTF-16 index) of the longest prefix of `s` of at most `maxBytes` UTF-8 bytes, and that size, in O(maxBytes). */
export function utf8PrefixEnd(s: string, maxBytes: number): { end: number; bytes: number } {
  let bytes = 0;
  let i = 0;
  while (i < s.length) {
    const w = widthAt(s, i);
    if (bytes + w.bytes > maxBytes) break;
    bytes += w.bytes;
    i += w.units;
  }
  return { end: i, bytes };
}

/** Where the longest suffix of `s` of at most `maxBytes` UTF-8 bytes begins (a UTF-16 index), in O(maxBytes). */
export function utf8SuffixStart(s: string, maxBytes: number): number {
  let bytes = 0;
  let i = s.length;
  while (i > 0) {
    let start = i - 1;
    if (start > 0 && isLow(s.charCodeAt(start)) && isHigh(s.charCodeAt(start - 1))) start--;
    const { bytes: w } = widthAt(s, start);
    if (bytes + w > maxBytes) break;
    bytes += w;
    i = start;
  }
  return i;
}

/** `s` cut to at most `maxBytes` UTF-8 bytes on a code point boundary, `…` counted when cut, detached from `s`. */
export function clipUtf8(s: string, maxBytes: number): string {
  if (Buffer.byteLength(s, 'utf8') <= maxBytes) return s;
  return `${detachString(s.slice(0, utf8PrefixEnd(s, maxBytes - 3).end))}…`;
}

/** `i`, or `i - 1` when a cut at `i` would split a surrogate pair: the cut that keeps less. */
export function unitCutBefore(s: string, i: number): number {
  return i > 0 && i < s.length && isHigh(s.charCodeAt(i - 1)) ? i - 1 : i;
}

/** `i`, or `i + 1` when a cut at `i` would split a surrogate pair: the cut that drops more. */
export function unitCutAfter(s: string, i: number): number {
  return i < s.length && isLow(s.charCodeAt(i)) ? i + 1 : i;
}

/**
 * The largest cut at or before `end` of `b` that does not end inside a
 * multi-byte UTF-8 sequence; invalid bytes cut as they are, so it inspects
 * at most four bytes.
 */
export function utf8CompleteEnd(b: Uint8Array, end: number = b.length): number {
  let lead = end - 1;
  while (lead >= 0 && lead > end - 4 && ((b[lead] as number) & 0xc0) === 0x80) lead--;
  if (lead < 0) return end;
  const x = b[lead] as number;
  const need = x >= 0xf0 ? 4 : x >= 0xe0 ? 3 : x >= 0xc0 ? 2 : 1;
  return end - lead < need ? lead : end;
}

/** UTF-8 size of the text `bytes` decode to (U+FFFD, three bytes, for each invalid sequence). */
export function decodedSize(bytes: Uint8Array): number {
  if (isUtf8(bytes)) return bytes.length;
  return Buffer.byteLength(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('utf8'), 'utf8');
}

/**
 * The longest cut of `b` whose text (U+FFFD for each maximal invalid
 * subpart, as TextDecoder does) takes at most `max` bytes and splits no
 * character, in one pass.
 */
export function textBudgetCut(b: Uint8Array, max: number): number {
  // Valid text: its size is its bytes, so the cut is the bound, backed off a split character.
  const fast = utf8CompleteEnd(b, Math.min(b.length, max));
  if (isUtf8(b.subarray(0, fast))) return fast;
  let i = 0;
  let text = 0;
  while (i < b.length) {
    const x = b[i] as number;
    let len = 1;
    let width = 1;
    if (x >= 0x80) {
      let need = 0;
      let lo = 0x80;
      let hi = 0xbf;
      if (x >= 0xc2 && x <= 0xdf) need = 1;
      else if (x >= 0xe0 && x <= 0xef) {
        need = 2;
        if (x === 0xe0) lo = 0xa0;
        if (x === 0xed) hi = 0x9f;
      } else if (x >= 0xf0 && x <= 0xf4) {
        need = 3;
        if (x === 0xf0) lo = 0x90;
        if (x === 0xf4) hi = 0x8f;
      }
      width = 3; // U+FFFD, unless the sequence completes
      let j = 1;
      while (need > 0 && j <= need && i + j < b.length) {
        const y = b[i + j] as number;
        if (y < lo || y > hi) break;
        lo = 0x80;
        hi = 0xbf;
        j++;
      }
      if (need > 0 && j === need + 1) width = len = need + 1;
      else if (need > 0 && i + j === b.length)
        break; // may finish past the end: the next page's
      else len = need > 0 ? j : 1;
    }
    if (text + width > max) break;
    text += width;
    i += len;
  }
  return i;
}

/** A copy of `s` sharing no storage with a larger string: V8 may keep a slice as a view that keeps a huge original alive. */
export function detachString(s: string): string {
  return Buffer.from(s, 'utf8').toString('utf8');
}

/** The first `maxUnits` UTF-16 units of `s` at most, one fewer when the cut would split a surrogate pair. */
export function unitPrefix(s: string, maxUnits: number): string {
  if (s.length <= maxUnits) return s;
  return s.slice(0, unitCutBefore(s, maxUnits));
}

/**
 * The marker after a text cut to its bound: how many bytes were cut and,
 * when the whole was kept, the `read` call that pages it, in the form of
 * every other read hint, so a model follows it the same way.
 */
export function cutMarker(cutBytes: number, wholeDigest?: string): string {
  return wholeDigest === undefined
    ? `… [${cutBytes} more bytes cut]`
    : `… [${cutBytes} more bytes cut; the whole text: read(filePath="artifact://${wholeDigest}")]`;
}

/** The most bytes {@link cutMarker} can take for a text of `fullBytes` bytes (the digest counted in full). */
export function cutMarkerBytes(fullBytes: number): number {
  return Buffer.byteLength(cutMarker(fullBytes, '0'.repeat(64)), 'utf8');
}
