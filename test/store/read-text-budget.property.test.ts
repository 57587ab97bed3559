/**
 * Cutting stored bytes for a page of text: the cut never changes how the
 * bytes decode (no character split, no invalid sequence decoded differently
 * in two pages) and its text fits the budget.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodedSize, textBudgetCut } from '../../engine/protocol/text.js';

const dec = (b: Uint8Array) => Buffer.from(b).toString('utf8');

/** Bytes biased towards UTF-8 structure: ASCII, lead bytes, continuation bytes, valid characters. */
const utf8ish = fc
  .array(
    fc.oneof(
      fc.integer({ min: 0x20, max: 0x7e }).map((x) => [x]),
      fc.integer({ min: 0x80, max: 0xff }).map((x) => [x]),
      fc.constantFrom('é', '€', '😀', '\u{10FFFF}', '\uD7FF').map((c) => [...Buffer.from(c)]),
      fc.constantFrom([0xe0, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90], [0xf0, 0x9f, 0x98], [0xc0, 0xaf]),
    ),
    { maxLength: 60 },
  )
  .map((parts) => Uint8Array.from(parts.flat()));

describe('textBudgetCut', () => {
  it('fits the budget and never changes the decoding', () => {
    fc.assert(
      fc.property(utf8ish, fc.integer({ min: 0, max: 200 }), (b, max) => {
        const c = textBudgetCut(b, max);
        expect(c).toBeGreaterThanOrEqual(0);
        expect(c).toBeLessThanOrEqual(b.length);
        expect(decodedSize(b.subarray(0, c))).toBeLessThanOrEqual(max);
        // Decoding the two sides apart gives the same text as decoding them together.
        expect(dec(b.subarray(0, c)) + dec(b.subarray(c))).toBe(dec(b));
      }),
      { numRuns: 3000 },
    );
  });

  it('cuts valid text on the budget, backed off a split character', () => {
    const b = Buffer.from('ab€😀');
    expect(textBudgetCut(b, 5)).toBe(5); // 'ab€'
    expect(textBudgetCut(b, 8)).toBe(5); // the 😀 needs 4
    expect(textBudgetCut(b, 9)).toBe(9);
    expect(textBudgetCut(Buffer.from([0xff, 0xff, 0xff]), 7)).toBe(2); // each is U+FFFD, 3 bytes
  });
});
