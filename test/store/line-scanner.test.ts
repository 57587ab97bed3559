/**
 * The line scanner counts lines with WebAssembly SIMD on the capture path
 * (word-at-a-time JavaScript where that is missing, and for short chunks);
 * these properties pin both to the obvious byte-at-a-time definition for any
 * content, chunking and buffer alignment. How a regression shows: wrong line counts in
 * results and index entries that point mid-line (pages starting at the wrong line).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { INDEX_EVERY_BYTES, INDEX_EVERY_LINES, LineScanner } from '../../store/line-index.js';
import { newlineFinder } from '../../store/newline-simd.js';

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

function scan(chunks: Uint8Array[], simd = true): { newlines: number; entries: number[]; lines: number } {
  const s = new LineScanner({ simd });
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
  it('has WebAssembly SIMD here, so the properties below test the SIMD path', () => {
    expect(newlineFinder()).toBeDefined();
  });

  for (const simd of [true, false]) {
    it(`counts newlines and places index entries exactly like a byte-at-a-time scan (${simd ? 'SIMD' : 'JavaScript'})`, () => {
      fc.assert(
        fc.property(chunked, (chunks) => {
          const got = scan(chunks, simd);
          const want = naive(chunks);
          expect(got.newlines).toBe(want.newlines);
          expect(got.entries).toEqual(want.entries);
        }),
        { numRuns: 200 },
      );
    });
  }

  it('scans a chunk larger than the SIMD memory in windows, entries falling across their seams', () => {
    // 700 KiB: the finder holds 256 KiB, so this chunk takes three windows; lines of every length near a seam.
    const parts: string[] = [];
    let size = 0;
    for (let i = 0; size < 700 * 1024; i++) {
      const line = `${'x'.repeat(i % 97)}${i % 5 === 0 ? '' : String(i)}\n`;
      parts.push(line);
      size += line.length;
    }
    const whole = Buffer.from(parts.join(''));
    for (const shift of [0, 1, 3]) {
      const chunk = whole.subarray(shift);
      const got = scan([chunk]);
      const want = naive([chunk]);
      expect(got.newlines).toBe(want.newlines);
      expect(got.entries).toEqual(want.entries);
      expect(got.lines).toBe(want.newlines + (chunk[chunk.length - 1] === 10 ? 0 : 1));
    }
  });

  it('finds the k-th newline of a range, or says how many there were (the SIMD module itself)', () => {
    const f = newlineFinder();
    if (!f) throw new Error('no WebAssembly SIMD');
    const text = Buffer.from(`a\n\n${'b'.repeat(300)}\n${'c\n'.repeat(40)}`);
    f.bytes.set(text, 0);
    const positions: number[] = [];
    for (let i = 0; i < text.length; i++) if (text[i] === 10) positions.push(i);
    for (let from = 0; from < 20; from++) {
      for (const to of [from, from + 15, from + 16, from + 17, 256, 300, 303, 304, text.length]) {
        const inRange = positions.filter((q) => q >= from && q < to);
        for (const k of [1, 2, 3, 17, inRange.length, inRange.length + 1, 2 ** 31 - 1]) {
          if (k < 1) continue;
          expect(f.nth(from, to, k)).toBe(k <= inRange.length ? inRange[k - 1] : -1 - inRange.length);
        }
      }
    }
  });

  it('follows the line rule for the last line', () => {
    expect(scan([Buffer.from(`${'a'.repeat(300)}\n`)]).lines).toBe(1);
    expect(scan([Buffer.from(`${'a\n'.repeat(150)}b`)]).lines).toBe(151);
    expect(scan([]).lines).toBe(0);
    expect(scan([Buffer.from('a')]).lines).toBe(1);
    expect(scan([Buffer.from('a\n')]).lines).toBe(1);
    expect(scan([Buffer.from('a\n'), Buffer.from('b')]).lines).toBe(2);
    expect(scan([Buffer.from('\n\n\n\n\n\n\n\n\n')]).lines).toBe(9);
  });
});
