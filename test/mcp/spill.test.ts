/**
 * The spill of a large MCP message (workers/mcp/spill.ts and
 * spill-read.ts): the skeleton parser reads any JSON as JSON.parse does,
 * whatever the read size, leaving only large result texts in the file; the
 * span decoder gives those texts back exactly, however the bytes are cut.
 */
import { closeSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseSkeleton, SPAN_MIN_BYTES, type SpillSpan } from '../../workers/mcp/spill.js';
import { JsonStringDecoder, safeCut } from '../../workers/mcp/spill-read.js';

/** An unlinked file holding `text`, open for reading. */
function fileOf(text: string): { fd: number; size: number; bytes: Buffer } {
  const path = join(tmpdir(), `sluice-spill-test-${process.pid}-${Math.random().toString(16).slice(2)}`);
  const fd = openSync(path, 'wx+', 0o600);
  unlinkSync(path);
  const bytes = Buffer.from(text, 'utf8');
  writeSync(fd, bytes, 0, bytes.length, 0);
  return { fd, size: bytes.length, bytes };
}

function skeleton(text: string, chunk: number): { value: unknown; spans: SpillSpan[]; bytes: Buffer } {
  const f = fileOf(text);
  const spans: SpillSpan[] = [];
  try {
    const value = parseSkeleton(f.fd, f.size, (s) => `<span ${spans.push(s) - 1}>`, chunk);
    return { value, spans, bytes: f.bytes };
  } finally {
    closeSync(f.fd);
  }
}

function decodeInPieces(escaped: Buffer, cuts: number[]): string {
  const d = new JsonStringDecoder();
  let out = '';
  let at = 0;
  for (const c of [...cuts.filter((x) => x > 0 && x < escaped.length)].sort((a, b) => a - b)) {
    out += d.write(escaped.subarray(at, c));
    at = c;
  }
  return out + d.write(escaped.subarray(at)) + d.end();
}

const awkward = fc.string({
  unit: fc.constantFrom('a', 'é', '😀', '"', '\\', '\n', '\t', '\u0001', '\ud83d', '/', ' '),
});

describe('the spilled-message parser', () => {
  it('reads any JSON value as JSON.parse does, at any read size', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.integer({ min: 1, max: 64 }), (v, chunk) => {
        const text = JSON.stringify(v);
        expect(skeleton(text, chunk).value).toEqual(JSON.parse(text));
      }),
      { numRuns: 300 },
    );
  });

  it('leaves a large result text in the file as a span whose bytes decode to it, however they are cut', () => {
    fc.assert(
      fc.property(awkward, fc.array(fc.nat()), fc.integer({ min: 7, max: 4096 }), (piece, cuts, chunk) => {
        const big = `${piece}${'x'.repeat(SPAN_MIN_BYTES + 1)}${piece}`;
        const message = {
          jsonrpc: '2.0',
          id: 3,
          result: {
            content: [
              { type: 'text', text: 'small' },
              { type: 'text', text: big },
            ],
            isError: false,
          },
        };
        const { value, spans, bytes } = skeleton(JSON.stringify(message), chunk);
        expect(value).toEqual({
          ...message,
          result: {
            ...message.result,
            content: [
              { type: 'text', text: 'small' },
              { type: 'text', text: '<span 0>' },
            ],
          },
        });
        const span = spans[0] as SpillSpan;
        const escaped = bytes.subarray(span.start, span.end);
        expect(
          decodeInPieces(
            escaped,
            cuts.map((c) => c % (escaped.length + 1)),
          ),
        ).toBe(big);
      }),
      { numRuns: 100 },
    );
  });

  it('keeps a large string anywhere but a result text in memory, and refuses text that is not JSON', () => {
    const big = 'y'.repeat(SPAN_MIN_BYTES * 2);
    const message = { jsonrpc: '2.0', method: 'notifications/message', params: { data: big } };
    expect(skeleton(JSON.stringify(message), 1000)).toMatchObject({ value: message, spans: [] });
    for (const bad of ['{"a":1', '{"a" 1}', '[1,,2]', '"open', '{"a":1}x', 'nul']) {
      expect(() => skeleton(bad, 3), bad).toThrow(SyntaxError);
    }
  });

  it('cuts escaped text only between whole escapes', () => {
    expect(safeCut('abc\\')).toBe(3);
    expect(safeCut('ab\\u00e')).toBe(2);
    expect(safeCut('ab\\ud83d')).toBe(2);
    expect(safeCut('ab\\ud83d\\ude00')).toBe(14);
    expect(safeCut('a\\nb\\"')).toBe(6);
  });
});
