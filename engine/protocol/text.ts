/**
 * Cutting text without breaking it: the one place that knows how wide a
 * UTF-16 string is in UTF-8 and where a cut may fall (never between the two
 * halves of a surrogate pair). Used wherever sluice bounds text it holds.
 */

/** UTF-8 width of the code point at `i` of `s` and the UTF-16 units it takes (a lone surrogate is U+FFFD, 3 bytes). */
export function widthAt(s: string, i: number): { bytes: number; units: number } {
  const c = s.charCodeAt(i);
  if (c < 0x80) return { bytes: 1, units: 1 };
  if (c < 0x800) return { bytes: 2, units: 1 };
  if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
    const d = s.charCodeAt(i + 1);
    if (d >= 0xdc00 && d <= 0xdfff) return { bytes: 4, units: 2 };
  }
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
  const c = s.charCodeAt(maxUnits - 1);
  return s.slice(0, c >= 0xd800 && c <= 0xdbff ? maxUnits - 1 : maxUnits);
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
