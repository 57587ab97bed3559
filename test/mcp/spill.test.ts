/**
 * The spill of a large MCP message (workers/mcp/spill.ts and
 * spill-read.ts): the skeleton parser reads any JSON as JSON.parse does,
 * whatever the read size, leaving only large result texts in the file; the
 * span decoder gives those texts back exactly, however the bytes are cut.
 */
import { closeSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseSkeleton, SPAN_MIN_BYTES, type SpillSpan } from '../../workers/mcp/skeleton.js';
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

async function skeleton(
  text: string,
  chunk: number,
): Promise<{ value: unknown; spans: SpillSpan[]; raws: SpillSpan[]; bytes: Buffer }> {
  const f = fileOf(text);
  const spans: SpillSpan[] = [];
  const raws: SpillSpan[] = [];
  try {
    const value = await parseSkeleton(
      async (buf, length, position) => readSync(f.fd, buf, 0, length, position),
      f.size,
      { span: (s) => `<span ${spans.push(s) - 1}>`, raw: (s) => ({ raw: raws.push(s) - 1 }) },
      chunk,
    );
    return { value, spans, raws, bytes: f.bytes };
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
  it('keeps a "__proto__" key as an own property, as JSON.parse does', async () => {
    const text = '{"__proto__":{"polluted":1},"a":[{"__proto__":0}]}';
    const { value } = await skeleton(text, 5);
    expect(value).toEqual(JSON.parse(text));
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(({} as { polluted?: number }).polluted).toBeUndefined();
  });

  it('reads any JSON value as JSON.parse does, at any read size', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), fc.integer({ min: 1, max: 64 }), async (v, chunk) => {
        const text = JSON.stringify(v);
        expect((await skeleton(text, chunk)).value).toEqual(JSON.parse(text));
      }),
      { numRuns: 300 },
    );
  });

  it('leaves a large result text in the file as a span whose bytes decode to it, however they are cut', async () => {
    await fc.assert(
      fc.asyncProperty(awkward, fc.array(fc.nat()), fc.integer({ min: 7, max: 4096 }), async (piece, cuts, chunk) => {
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
        const { value, spans, bytes } = await skeleton(JSON.stringify(message), chunk);
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

  it('keeps a large string anywhere but a result text in memory, and refuses text that is not JSON', async () => {
    const big = 'y'.repeat(SPAN_MIN_BYTES * 2);
    const message = { jsonrpc: '2.0', method: 'notifications/message', params: { data: big } };
    expect(await skeleton(JSON.stringify(message), 1000)).toMatchObject({ value: message, spans: [] });
    for (const bad of [
      '{"a":1',
      '{"a" 1}',
      '[1,,2]',
      '"open',
      '{"a":1}x',
      'nul',
      '{"result":{"structuredContent":{"a":]}}}',
    ]) {
      await expect(skeleton(bad, 3), bad).rejects.toThrow(SyntaxError);
    }
  });

  it('leaves large image data and resource blobs in the file, and structured content as its raw JSON', async () => {
    const data = 'QUJD'.repeat(SPAN_MIN_BYTES);
    const structured = { rows: [{ a: 1, s: 'x"y' }, [true, null, -2.5e3]], note: 'é😀' };
    const message = {
      jsonrpc: '2.0',
      id: 9,
      result: {
        content: [
          { type: 'image', mimeType: 'image/png', data },
          { type: 'resource', resource: { uri: 'file:///b', blob: data } },
        ],
        structuredContent: structured,
      },
    };
    for (const chunk of [5, 333, 1 << 20]) {
      const { value, spans, raws, bytes } = await skeleton(JSON.stringify(message), chunk);
      expect(value).toEqual({
        ...message,
        result: {
          content: [
            { type: 'image', mimeType: 'image/png', data: '<span 0>' },
            { type: 'resource', resource: { uri: 'file:///b', blob: '<span 1>' } },
          ],
          structuredContent: { raw: 0 },
        },
      });
      for (const s of spans) expect(bytes.subarray(s.start, s.end).toString()).toBe(data);
      const raw = raws[0] as SpillSpan;
      expect(JSON.parse(bytes.subarray(raw.start, raw.end).toString())).toEqual(structured);
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
