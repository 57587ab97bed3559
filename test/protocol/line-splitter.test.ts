import { describe, expect, it } from 'vitest';
import { LineSplitter } from '../../engine/protocol/line-splitter.js';

function feed(max: number, chunks: string[]): string[] {
  const out: string[] = [];
  const s = new LineSplitter(max);
  const sink = { line: (b: Buffer) => out.push(b.toString('utf8')), oversized: () => out.push('<oversized>') };
  for (const c of chunks) s.push(Buffer.from(c, 'utf8'), sink);
  return out;
}

describe('LineSplitter', () => {
  it('joins a line split over many chunks and splits a chunk holding many lines', () => {
    expect(feed(100, ['{"a"', ':1', '}\n{"b":2}\n{"c"', ':3}\n'])).toEqual(['{"a":1}', '{"b":2}', '{"c":3}']);
  });

  it('drops the carriage return of a CRLF line and keeps empty lines', () => {
    expect(feed(100, ['x\r\n\ny\n'])).toEqual(['x', '', 'y']);
  });

  it('reports a line past the bound once, drops it to its newline and goes on with the next', () => {
    expect(feed(8, ['12345', '6789abc', 'def\nok\n'])).toEqual(['<oversized>', 'ok']);
    expect(feed(8, ['12345678\n'])).toEqual(['12345678']);
  });

  it('holds nothing of a line once it is complete, and nothing of an oversized one', () => {
    const s = new LineSplitter(4);
    const sink = { line: () => {}, oversized: () => {} };
    s.push(Buffer.from('abc'), sink);
    expect(s.pendingBytes).toBe(3);
    s.push(Buffer.from('\n'), sink);
    expect(s.pendingBytes).toBe(0);
    s.push(Buffer.from('abcdefgh'), sink);
    expect(s.pendingBytes).toBe(0);
  });

  it('keeps a multi-byte UTF-8 character whole when its bytes arrive in different chunks, at every cut', () => {
    const text = '{"t":"é😀中"}\n{"u":"ß"}\n';
    const bytes = Buffer.from(text, 'utf8');
    for (let a = 1; a < bytes.length; a++) {
      for (let b = a; b < bytes.length; b++) {
        const out: Buffer[] = [];
        const s = new LineSplitter(100);
        const sink = { line: (l: Buffer) => out.push(l), oversized: () => {} };
        for (const piece of [bytes.subarray(0, a), bytes.subarray(a, b), bytes.subarray(b)]) s.push(piece, sink);
        expect(Buffer.concat(out.flatMap((l) => [l, Buffer.from('\n')]))).toEqual(bytes);
        expect(out.map((l) => l.toString('utf8'))).toEqual(['{"t":"é😀中"}', '{"u":"ß"}']);
      }
    }
  });

  it('reports every byte of an oversized line it drops, from its held start, then its end', () => {
    const dropped: string[] = [];
    const s = new LineSplitter(4);
    const sink = {
      line: (l: Buffer) => dropped.push(`line ${l}`),
      oversized: () => dropped.push('oversized'),
      dropped: (piece: Buffer, end: boolean) => dropped.push(end ? 'end' : piece.toString()),
    };
    for (const c of ['ab', 'cdef', 'gh\nok\n']) s.push(Buffer.from(c), sink);
    expect(dropped).toEqual(['oversized', 'ab', 'cdef', 'gh', 'end', 'line ok']);
  });
});
