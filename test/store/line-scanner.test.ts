/**
 * The line scanner counts lines word-at-a-time on the capture path; these
 * properties pin it to the obvious byte-at-a-time definition for any content,
 * chunking and buffer alignment. How a regression shows: wrong line counts in
 * results and index entries that point mid-line (pages starting at the wrong line).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { INDEX_EVERY_BYTES, INDEX_EVERY_LINES, LineScanner } from '../../store/line-index.js';

function naive(chunks: Uint8Array[]): { newlines: number; entries: number[] } {
  let newlines = 0;
  let base = 0;
  let lastLine = 0;
  let lastOffset = 0;
  const entries: number[] = [];
  for (const c of chunks) {
    for (let i = 0; i < c.length; i++) {
      if (c[i] !== 10) continue;
      newlines++;
      const start = base + i + 1;
      if (newlines - lastLine >= INDEX_EVERY_LINES || start - lastOffset >= INDEX_EVERY_BYTES) {
        entries.push(newlines, start);
        lastLine = newlines;
        lastOffset = start;
      }
    }
    base += c.length;
  }
  return { newlines, entries };
}

function scan(chunks: Uint8Array[]): { newlines: number; entries: number[]; lines: number } {
  const s = new LineScanner();
  const entries: number[] = [];
  for (const c of chunks) {
    s.push(c);
    const b = s.takeEntries();
    for (let i = 0; i < b.length; i += 8) entries.push(Number(b.readBigUInt64LE(i)));
  }
  return { newlines: s.newlines, entries, lines: s.lines };
}

/** Content with a given newline density, cut into chunks at arbitrary offsets of a shared buffer (so alignment varies). */
const chunked = fc
  .record({
    size: fc.integer({ min: 0, max: 200_000 }),
    density: fc.double({ min: 0, max: 1, noNaN: true }),
    shift: fc.integer({ min: 0, max: 7 }),
    cuts: fc.array(fc.integer({ min: 0, max: 70_000 }), { maxLength: 12 }),
    seed: fc.integer(),
  })
  .map(({ size, density, shift, cuts, seed }) => {
    const buf = Buffer.alloc(size + shift);
    let x = seed | 1;
    for (let i = 0; i < buf.length; i++) {
      x = (x * 1103515245 + 12345) | 0;
      buf[i] = ((x >>> 8) & 0xffff) / 0xffff < density * 0.5 ? 10 : 32 + ((x >>> 16) & 63);
    }
    const chunks: Uint8Array[] = [];
    let off = shift;
    for (const c of [...cuts, size]) {
      const end = Math.min(buf.length, off + c);
      chunks.push(buf.subarray(off, end));
      off = end;
    }
    if (off < buf.length) chunks.push(buf.subarray(off));
    return chunks;
  });

describe('LineScanner', () => {
  it('counts newlines and places index entries exactly like a byte-at-a-time scan', () => {
    fc.assert(
      fc.property(chunked, (chunks) => {
        const got = scan(chunks);
        const want = naive(chunks);
        expect(got.newlines).toBe(want.newlines);
        expect(got.entries).toEqual(want.entries);
      }),
      { numRuns: 200 },
    );
  });

  it('follows the line rule for the last line', () => {
    expect(scan([]).lines).toBe(0);
    expect(scan([Buffer.from('a')]).lines).toBe(1);
    expect(scan([Buffer.from('a\n')]).lines).toBe(1);
    expect(scan([Buffer.from('a\n'), Buffer.from('b')]).lines).toBe(2);
    expect(scan([Buffer.from('\n\n\n\n\n\n\n\n\n')]).lines).toBe(9);
  });
});
