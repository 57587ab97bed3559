/**
 * Cutting text without breaking it: the one place that knows how wide a
 * UTF-16 string is in UTF-8 and where a cut may fall. A string cut never
 * falls between the two halves of a surrogate pair; a byte cut never falls
 * inside a UTF-8 sequence. Used wherever sluice bounds text or bytes it
 * shows (workers, the call path, presentation, the store's pages), and
 * property-tested once (test/protocol/text-cut.property.test.ts).
 */

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

/**
 * The end (a UTF-16 index) of the longest prefix of `s` whose UTF-8
 * encoding has at most `maxBytes` bytes, and that size. Scans only the
 * prefix, so it costs O(maxBytes) whatever the length of `s`.
 */
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

/**
 * Where the longest suffix of `s` whose UTF-8 encoding has at most
 * `maxBytes` bytes begins (a UTF-16 index). Walks from the end, so it costs
 * O(maxBytes) whatever the length of `s`.
 */
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

/**
 * `s` cut to at most `maxBytes` UTF-8 bytes on a code point boundary, with
 * `…` (3 bytes, counted) when cut, detached from `s`.
 */
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
 * multi-byte UTF-8 sequence: an unfinished sequence at the end (at most
 * three bytes) is left out. Invalid bytes are not this function's concern
 * (a run of continuation bytes, or bytes that are not UTF-8, cut as they
 * are), so it inspects at most four bytes.
 */
export function utf8CompleteEnd(b: Uint8Array, end: number = b.length): number {
  let lead = end - 1;
  // Walk back over at most 3 continuation bytes (10xxxxxx) to the lead byte.
  while (lead >= 0 && lead > end - 4 && ((b[lead] as number) & 0xc0) === 0x80) lead--;
  if (lead < 0) return end;
  const x = b[lead] as number;
  const need = x >= 0xf0 ? 4 : x >= 0xe0 ? 3 : x >= 0xc0 ? 2 : 1;
  return end - lead < need ? lead : end;
}

/**
 * A copy of `s` that does not share storage with a larger string: V8 may
 * keep a slice as a view on its parent, so a bounded text would otherwise
 * keep a whole (perhaps huge) original alive.
 */
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
 * when the engine kept the whole, where it is. One format for every field.
 */
export function cutMarker(cutBytes: number, wholeDigest?: string): string {
  return wholeDigest === undefined
    ? `… [${cutBytes} more bytes cut]`
    : `… [${cutBytes} more bytes cut; the whole text: artifact://${wholeDigest}]`;
}

/** The most bytes {@link cutMarker} can take for a text of `fullBytes` bytes (the digest counted in full). */
export function cutMarkerBytes(fullBytes: number): number {
  return Buffer.byteLength(cutMarker(fullBytes, '0'.repeat(64)), 'utf8');
}
