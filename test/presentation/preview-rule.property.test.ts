import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Preview, PreviewBuilder, previewFromString } from '../../engine/presentation/preview.js';
import { linesOfString } from '../../store/lines.js';
import { byteLength, expectRoundTrip, utf8 } from './support.js';

/** The preview rule straight from its definition: try every code-point prefix, keep the longest that fits. */
function oracle(content: string, maxLines: number, maxBytes: number): Preview {
  const cps = Array.from(content);
  let best = '';
  let prefix = '';
  for (const cp of cps) {
    prefix += cp;
    if (linesOfString(prefix) <= maxLines && byteLength(prefix) <= maxBytes) best = prefix;
  }
  const truncated = best.length < content.length;
  const newlines = best.split('\n').length - 1;
  const lines = linesOfString(best);
  return { text: best, bytes: byteLength(best), lines, truncated, offset: truncated ? newlines : lines };
}

const piece = fc.oneof(
  fc.constant('\n'),
  fc.constant('\r\n'),
  fc.constantFrom('é', '€', '😀', 'a', ' '),
  fc.string({ unit: 'binary', maxLength: 6 }),
);
const content = fc.array(piece, { maxLength: 30 }).map((p) => p.join(''));

describe('the preview rule, for any content, limits and chunking', () => {
  it('builder, string preview and the definition agree, within the limits, with a truthful offset', () => {
    fc.assert(
      fc.property(
        content,
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 48 }),
        fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 8 }),
        (text, maxLines, maxBytes, chunkSizes) => {
          const expected = oracle(text, maxLines, maxBytes);
          expect(previewFromString(text, maxLines, maxBytes)).toEqual(expected);

          const bytes = utf8(text);
          const b = new PreviewBuilder(maxLines, maxBytes);
          let pos = 0;
          for (let i = 0; pos < bytes.length; i++) {
            const size = chunkSizes[i % chunkSizes.length] as number;
            b.push(bytes.subarray(pos, pos + size));
            pos += size;
            expect(b.retainedBytes).toBeLessThanOrEqual(maxBytes);
          }
          expect(b.finish(bytes.length)).toEqual(expected);

          expect(expected.bytes).toBeLessThanOrEqual(maxBytes);
          expect(expected.lines).toBeLessThanOrEqual(maxLines);
          expectRoundTrip(text, expected);
        },
      ),
      { numRuns: 1500 },
    );
  });
});
