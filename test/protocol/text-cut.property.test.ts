/**
 * The one UTF-8 cutter (engine/protocol/text.ts), against Buffer's own
 * encoding: string cuts never split a surrogate pair and are the longest
 * that fit; byte cuts never end inside a sequence and keep everything else.
 */
import { isUtf8 } from 'node:buffer';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  clipUtf8,
  unitCutAfter,
  unitCutBefore,
  utf8CompleteEnd,
  utf8PrefixEnd,
  utf8SuffixStart,
  widthAt,
} from '../../engine/protocol/text.js';

const bytesOf = (s: string) => Buffer.byteLength(s, 'utf8');
const isHigh = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number) => c >= 0xdc00 && c <= 0xdfff;
/** True when a cut at `i` falls between the halves of a surrogate pair. */
const splitsPair = (s: string, i: number) =>
  i > 0 && i < s.length && isHigh(s.charCodeAt(i - 1)) && isLow(s.charCodeAt(i));

/** Strings of ASCII, 2-, 3- and 4-byte characters, newlines and lone surrogates. */
const text = fc
  .array(fc.constantFrom('a', '\n', 'é', '€', '😀', '\ud800', '\udfff', 'xyz'), { maxLength: 40 })
  .map((parts) => parts.join(''));
const anyString = fc.oneof(text, fc.string({ unit: 'binary', maxLength: 30 }));

describe('the UTF-8 cutter', () => {
  it('widthAt agrees with Buffer on every code point, lone surrogates as U+FFFD', () => {
    fc.assert(
      fc.property(anyString, (s) => {
        let total = 0;
        for (let i = 0; i < s.length; ) {
          const w = widthAt(s, i);
          expect(w.bytes).toBe(bytesOf(s.slice(i, i + w.units)));
          total += w.bytes;
          i += w.units;
        }
        expect(total).toBe(bytesOf(s));
      }),
    );
  });

  it('a byte-bounded prefix is the longest that fits and never splits a pair', () => {
    fc.assert(
      fc.property(anyString, fc.nat(60), (s, max) => {
        const { end, bytes } = utf8PrefixEnd(s, max);
        expect(bytes).toBe(bytesOf(s.slice(0, end)));
        expect(bytes).toBeLessThanOrEqual(max);
        expect(splitsPair(s, end)).toBe(false);
        if (end < s.length) expect(bytes + widthAt(s, end).bytes).toBeGreaterThan(max);
      }),
    );
  });

  it('a byte-bounded suffix is the longest that fits and never splits a pair', () => {
    fc.assert(
      fc.property(anyString, fc.nat(60), (s, max) => {
        const start = utf8SuffixStart(s, max);
        expect(bytesOf(s.slice(start))).toBeLessThanOrEqual(max);
        expect(splitsPair(s, start)).toBe(false);
        if (start > 0) {
          const prev = start >= 2 && splitsPair(s, start - 1) ? start - 2 : start - 1;
          expect(bytesOf(s.slice(prev))).toBeGreaterThan(max);
        }
      }),
    );
  });

  it('a clipped string fits its bound with its ellipsis, and an unclipped one is unchanged', () => {
    fc.assert(
      fc.property(anyString, fc.integer({ min: 3, max: 60 }), (s, max) => {
        const out = clipUtf8(s, max);
        if (bytesOf(s) <= max) {
          expect(out).toBe(s);
          return;
        }
        expect(out.endsWith('…')).toBe(true);
        expect(bytesOf(out)).toBeLessThanOrEqual(max);
        // What is kept is the encoded prefix of the original (lone surrogates as U+FFFD).
        const kept = Buffer.from(out.slice(0, -1), 'utf8');
        expect(Buffer.from(s, 'utf8').subarray(0, kept.length).equals(kept)).toBe(true);
      }),
    );
  });

  it('a unit cut moves at most one unit, never splits a pair, and never ends on a high surrogate', () => {
    fc.assert(
      fc.property(anyString, fc.nat(40), (s, n) => {
        const i = Math.min(n, s.length);
        const before = unitCutBefore(s, i);
        const after = unitCutAfter(s, i);
        expect(splitsPair(s, before)).toBe(false);
        expect(splitsPair(s, after)).toBe(false);
        // Back off a high surrogate at the end of the kept part: paired or lone, it has no partner there.
        expect(i - before).toBe(i > 0 && i < s.length && isHigh(s.charCodeAt(i - 1)) ? 1 : 0);
        expect(after - i).toBe(isLow(s.charCodeAt(i)) ? 1 : 0);
      }),
    );
  });

  it('a byte cut of UTF-8 ends on the last character boundary at or before it', () => {
    fc.assert(
      fc.property(text, fc.nat(200), (s, n) => {
        const b = Buffer.from(s, 'utf8');
        const end = Math.min(n, b.length);
        const boundaries = new Set<number>([0]);
        let at = 0;
        for (let i = 0; i < s.length; ) {
          const w = widthAt(s, i);
          at += w.bytes;
          boundaries.add(at);
          i += w.units;
        }
        let want = end;
        while (!boundaries.has(want)) want--;
        expect(utf8CompleteEnd(b, end)).toBe(want);
        expect(isUtf8(b.subarray(0, utf8CompleteEnd(b, end)))).toBe(true);
      }),
    );
  });

  it('a byte cut of bytes that are not UTF-8 holds back at most three bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), fc.nat(40), (bytes, n) => {
        const end = Math.min(n, bytes.length);
        const cut = utf8CompleteEnd(bytes, end);
        expect(cut).toBeLessThanOrEqual(end);
        expect(end - cut).toBeLessThanOrEqual(3);
      }),
    );
  });
});
