import { describe, expect, it } from 'vitest';
import { PreviewBuilder, previewFromString } from '../../engine/presentation/preview.js';
import { buildPreview, byteLength, expectRoundTrip, preview, utf8 } from './support.js';

describe('preview line limit', () => {
  const content = 'a\nb\nc\n';

  it('keeps the whole stream exactly at the line limit', () => {
    const p = preview(content, 3, 1000);
    expect(p).toEqual({ text: 'a\nb\nc\n', bytes: 6, lines: 3, truncated: false, offset: 3 });
  });

  it('cuts after the last allowed newline one below the limit, offset at the first unseen line', () => {
    const p = preview(content, 2, 1000);
    expect(p).toEqual({ text: 'a\nb\n', bytes: 4, lines: 2, truncated: true, offset: 2 });
    expectRoundTrip(content, p);
  });

  it('keeps the whole stream one above the limit', () => {
    expect(preview(content, 4, 1000)).toEqual({ text: content, bytes: 6, lines: 3, truncated: false, offset: 3 });
  });

  it('counts a last line without a newline as a line', () => {
    expect(preview('a\nb\nc', 3, 1000)).toEqual({ text: 'a\nb\nc', bytes: 5, lines: 3, truncated: false, offset: 3 });
    const p = preview('a\nb\nc', 2, 1000);
    expect(p).toEqual({ text: 'a\nb\n', bytes: 4, lines: 2, truncated: true, offset: 2 });
    expectRoundTrip('a\nb\nc', p);
  });

  it('keeps a single line without a newline at a limit of one line', () => {
    expect(preview('only line', 1, 1000)).toEqual({
      text: 'only line',
      bytes: 9,
      lines: 1,
      truncated: false,
      offset: 1,
    });
  });

  it('counts empty lines', () => {
    const p = preview('\n\n\n\n', 2, 1000);
    expect(p).toEqual({ text: '\n\n', bytes: 2, lines: 2, truncated: true, offset: 2 });
    expectRoundTrip('\n\n\n\n', p);
  });
});

describe('preview byte limit', () => {
  const content = 'hello\nworld\n'; // 12 bytes, 2 lines

  it('keeps the whole stream exactly at the byte limit', () => {
    expect(preview(content, 100, 12)).toEqual({ text: content, bytes: 12, lines: 2, truncated: false, offset: 2 });
  });

  it('one byte below the limit drops the final newline and re-reads that line', () => {
    const p = preview(content, 100, 11);
    expect(p).toEqual({ text: 'hello\nworld', bytes: 11, lines: 2, truncated: true, offset: 1 });
    expectRoundTrip(content, p);
  });

  it('keeps the whole stream one byte above the limit', () => {
    expect(preview(content, 100, 13)).toEqual({ text: content, bytes: 12, lines: 2, truncated: false, offset: 2 });
  });

  it('points the offset at a line cut by the byte limit', () => {
    const s = 'first\nsecond line\nthird\n';
    const p = preview(s, 100, 10);
    expect(p).toEqual({ text: 'first\nseco', bytes: 10, lines: 2, truncated: true, offset: 1 });
    expectRoundTrip(s, p);
  });

  it('re-reads a line whose newline lies just past the byte limit', () => {
    const p = preview('abc\ndef', 100, 3);
    expect(p).toEqual({ text: 'abc', bytes: 3, lines: 1, truncated: true, offset: 0 });
    expectRoundTrip('abc\ndef', p);
  });

  it('continues at the next line when the byte limit falls right after a newline', () => {
    const p = preview('abc\ndef', 100, 4);
    expect(p).toEqual({ text: 'abc\n', bytes: 4, lines: 1, truncated: true, offset: 1 });
    expectRoundTrip('abc\ndef', p);
  });

  it('cuts a stream without a trailing newline', () => {
    const p = preview('abcdef', 100, 4);
    expect(p).toEqual({ text: 'abcd', bytes: 4, lines: 1, truncated: true, offset: 0 });
    expectRoundTrip('abcdef', p);
  });
});

describe('preview with both limits', () => {
  const content = 'aaaa\nbbbb\ncccc\ndddd\n'; // 20 bytes, 4 lines

  it('applies the line limit when it binds first', () => {
    const p = preview(content, 2, 15);
    expect(p).toEqual({ text: 'aaaa\nbbbb\n', bytes: 10, lines: 2, truncated: true, offset: 2 });
    expectRoundTrip(content, p);
  });

  it('applies the byte limit when it binds first', () => {
    const p = preview(content, 3, 7);
    expect(p).toEqual({ text: 'aaaa\nbb', bytes: 7, lines: 2, truncated: true, offset: 1 });
    expectRoundTrip(content, p);
  });

  it('agrees when both bind at the same place', () => {
    const p = preview(content, 2, 10);
    expect(p).toEqual({ text: 'aaaa\nbbbb\n', bytes: 10, lines: 2, truncated: true, offset: 2 });
    expectRoundTrip(content, p);
  });

  it('is not truncated when the stream fits both exactly', () => {
    expect(preview(content, 4, 20)).toEqual({ text: content, bytes: 20, lines: 4, truncated: false, offset: 4 });
  });
});

describe('preview of CRLF text', () => {
  const content = 'a\r\nb\r\nc\r\n'; // 9 bytes, 3 lines: \r is content

  it('splits lines on \\n only', () => {
    const p = preview(content, 2, 100);
    expect(p).toEqual({ text: 'a\r\nb\r\n', bytes: 6, lines: 2, truncated: true, offset: 2 });
    expectRoundTrip(content, p);
  });

  it('may cut between \\r and \\n, and re-reads that line', () => {
    const p = preview(content, 100, 5);
    expect(p).toEqual({ text: 'a\r\nb\r', bytes: 5, lines: 2, truncated: true, offset: 1 });
    expectRoundTrip(content, p);
  });
});

describe('preview of multi-byte characters straddling the byte limit', () => {
  const cases = [
    { name: '2-byte é', ch: 'é', width: 2 },
    { name: '3-byte €', ch: '€', width: 3 },
    { name: '4-byte 😀', ch: '😀', width: 4 },
  ];
  for (const { name, ch, width } of cases) {
    it(`${name}: never splits it, whatever the limit and chunking`, () => {
      const content = `ab${ch}cd\nnext\n`;
      expect(byteLength(ch)).toBe(width);
      for (let limit = 2; limit < 2 + width; limit++) {
        const p = preview(content, 100, limit);
        expect(p).toEqual({ text: 'ab', bytes: 2, lines: 1, truncated: true, offset: 0 });
        expectRoundTrip(content, p);
      }
      const at = preview(content, 100, 2 + width);
      expect(at).toEqual({ text: `ab${ch}`, bytes: 2 + width, lines: 1, truncated: true, offset: 0 });
      expectRoundTrip(content, at);
    });

    it(`${name}: chunks split inside the character at every position give the same preview`, () => {
      const content = `ab${ch}${ch}cd`;
      const bytes = utf8(content);
      for (let limit = 1; limit <= bytes.length; limit++) {
        const expected = previewFromString(content, 10, limit);
        for (let cut = 1; cut < bytes.length; cut++) {
          const b = new PreviewBuilder(10, limit);
          b.push(bytes.subarray(0, cut));
          b.push(bytes.subarray(cut));
          expect(b.finish(bytes.length)).toEqual(expected);
        }
      }
    });
  }

  it('shows nothing when the first character is wider than the limit', () => {
    const p = preview('😀x', 5, 3);
    expect(p).toEqual({ text: '', bytes: 0, lines: 0, truncated: true, offset: 0 });
    expectRoundTrip('😀x', p);
  });
});

describe('preview of an empty stream', () => {
  it('is empty, zero lines and not truncated', () => {
    const b = new PreviewBuilder(10, 10);
    expect(b.finish(0)).toEqual({ text: '', bytes: 0, lines: 0, truncated: false, offset: 0 });
    expect(previewFromString('', 10, 10)).toEqual({ text: '', bytes: 0, lines: 0, truncated: false, offset: 0 });
  });

  it('ignores empty chunks', () => {
    const b = new PreviewBuilder(10, 10);
    b.push(new Uint8Array(0));
    b.push(new Uint8Array(0));
    expect(b.finish(0)).toEqual({ text: '', bytes: 0, lines: 0, truncated: false, offset: 0 });
  });
});

describe('preview memory bound', () => {
  const MiB = 1024 * 1024;

  it('keeps at most maxBytes of a single 100 MB line pushed in 64 KiB chunks', () => {
    const chunk = new Uint8Array(64 * 1024).fill(0x78); // 'x'
    const b = new PreviewBuilder(2000, 51200);
    let total = 0;
    let maxRetained = 0;
    while (total < 100 * MiB) {
      b.push(chunk);
      total += chunk.length;
      maxRetained = Math.max(maxRetained, b.retainedBytes, b.allocatedBytes);
    }
    expect(maxRetained).toBe(51200);
    expect(b.pushedBytes).toBe(100 * MiB);
    expect(b.full).toBe(true);
    const p = b.finish(total);
    expect(p).toEqual({ text: 'x'.repeat(51200), bytes: 51200, lines: 1, truncated: true, offset: 0 });
  });

  it('keeps at most maxBytes of a 100 MB line of 3-byte characters whose chunks split characters', () => {
    // 65536 is not a multiple of 3, so most chunk boundaries fall inside a '€'.
    // Chunks are views into one small repeating pattern, so the test itself holds no 100 MB either.
    const pattern = Buffer.alloc(64 * 1024 + 3, '€');
    const b = new PreviewBuilder(2000, 51200);
    for (let pos = 0; pos < 100 * MiB; pos += 64 * 1024) {
      b.push(pattern.subarray(pos % 3, (pos % 3) + 64 * 1024));
      expect(b.allocatedBytes).toBeLessThanOrEqual(51200);
    }
    const p = b.finish(100 * MiB);
    // 51200 = 3 * 17066 + 2: the last, partial '€' is left out.
    expect(p).toEqual({ text: '€'.repeat(17066), bytes: 51198, lines: 1, truncated: true, offset: 0 });
  });

  it('allocates only what a small output needs', () => {
    const b = new PreviewBuilder(2000, 10 * MiB);
    b.push(utf8('small\n'));
    expect(b.allocatedBytes).toBeLessThanOrEqual(4096);
    expect(b.finish(6)).toEqual({ text: 'small\n', bytes: 6, lines: 1, truncated: false, offset: 1 });
  });

  it('stops copying at the last allowed line, and the caller may stop pushing once full', () => {
    const b = new PreviewBuilder(2, 1000);
    b.push(utf8('one\ntwo\nthree\n'));
    expect(b.full).toBe(true);
    expect(b.retainedBytes).toBe(8);
    // The coordinator stopped pushing; the stream went on to 1 MB in total.
    expect(b.finish(MiB)).toEqual({ text: 'one\ntwo\n', bytes: 8, lines: 2, truncated: true, offset: 2 });
  });

  it('builds a string preview from its prefix only', () => {
    const big = `${'y'.repeat(1000)}\n`.repeat(1000);
    const p = previewFromString(big, 3, 100_000);
    expect(p.text).toBe(`${'y'.repeat(1000)}\n`.repeat(3));
    expect(p).toMatchObject({ bytes: 3003, lines: 3, truncated: true, offset: 3 });
  });
});

describe('preview builder misuse and bad input', () => {
  it('rejects limits that are not positive integers with EBADOPTION', () => {
    for (const [lines, bytes] of [
      [0, 10],
      [10, 0],
      [1.5, 10],
      [10, -1],
      [Number.NaN, 10],
    ] as const) {
      expect(() => new PreviewBuilder(lines, bytes)).toThrow(expect.objectContaining({ code: 'EBADOPTION' }));
      expect(() => previewFromString('x', lines, bytes)).toThrow(expect.objectContaining({ code: 'EBADOPTION' }));
    }
  });

  it('rejects a total smaller than what was pushed', () => {
    const b = new PreviewBuilder(10, 10);
    b.push(utf8('abcdef'));
    expect(() => b.finish(3)).toThrow(RangeError);
  });

  it('rejects a larger total while the preview still needed bytes that were never pushed', () => {
    const b = new PreviewBuilder(10, 10);
    b.push(utf8('abc'));
    expect(b.full).toBe(false);
    expect(() => b.finish(100)).toThrow(RangeError);
  });

  it('does not crash on invalid UTF-8 and still respects the byte limit', () => {
    const junk = new Uint8Array([0xff, 0xfe, 0x80, 0x80, 0x80, 0x0a, 0xc3, 0x41, 0xf0, 0x9f]);
    for (let limit = 1; limit <= junk.length + 2; limit++) {
      for (const chunk of [1, 3, junk.length]) {
        const p = buildPreview(junk, 10, limit, chunk);
        expect(p.bytes).toBe(byteLength(p.text));
        expect(p.bytes).toBeLessThanOrEqual(limit);
        expect(p.lines).toBeLessThanOrEqual(10);
      }
    }
  });

  it('counts a lone surrogate in a string as the 3 bytes it encodes to', () => {
    const p = previewFromString('a\ud800b', 10, 4);
    expect(p.truncated).toBe(true);
    expect(p.bytes).toBe(4);
    expect(p.text).toBe('a\ufffd');
  });
});
