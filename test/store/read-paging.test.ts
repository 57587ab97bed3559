import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { linesOfString } from '../../store/lines.js';
import { MAX_PAGE_LINES, type ReadPage } from '../../store/pages.js';
import type { Store } from '../../store/store.js';
import { STORE_BACKENDS } from './backends.js';
import { sha256 } from './helpers.js';

async function put(store: Store, content: string): Promise<string> {
  const { digest } = await store.publishBytes(content);
  return `artifact://${digest}`;
}

/** Reads every page with `limit` and checks the pages chain and reassemble the content exactly. */
async function readAll(store: Store, uri: string, limit: number): Promise<ReadPage[]> {
  const pages: ReadPage[] = [];
  let offset: number | null = 0;
  while (offset !== null) {
    const page: ReadPage = await store.readPage(uri, { offset, limit });
    pages.push(page);
    offset = page.nextOffset;
  }
  return pages;
}

describe.each(STORE_BACKENDS)('paged reads ($name)', ({ openStore }) => {
  it('returns exact pages with continuation metadata at every boundary', async () => {
    const store = await openStore();
    const uri = await put(store, 'l0\nl1\nl2\nl3\nl4\n');
    const digest = uri.slice('artifact://'.length);
    expect(await store.readPage(uri, { offset: 0, limit: 2 })).toEqual({
      content: 'l0\nl1\n',
      offset: 0,
      lines: 2,
      totalLines: 5,
      nextOffset: 2,
      nextByteOffset: null,
      lossy: false,
      digest,
      blob: digest,
    });
    expect(await store.readPage(uri, { offset: 2, limit: 2 })).toMatchObject({
      content: 'l2\nl3\n',
      lines: 2,
      nextOffset: 4,
    });
    expect(await store.readPage(uri, { offset: 4, limit: 2 })).toMatchObject({
      content: 'l4\n',
      offset: 4,
      lines: 1,
      totalLines: 5,
      nextOffset: null,
    });
    // A page that ends exactly at the last line has no next page.
    expect(await store.readPage(uri, { offset: 3, limit: 2 })).toMatchObject({ content: 'l3\nl4\n', nextOffset: null });
    expect(await store.readPage(uri, { offset: 0, limit: 5 })).toMatchObject({ lines: 5, nextOffset: null });
    expect(await store.readPage(uri, { offset: 0, limit: 4 })).toMatchObject({ lines: 4, nextOffset: 4 });
    expect(await store.readPage(uri, { offset: 1, limit: 1 })).toMatchObject({ content: 'l1\n', nextOffset: 2 });
  });

  it('reads the last line the same with and without a trailing newline', async () => {
    const store = await openStore();
    const withNl = await put(store, 'a\nb\n');
    const without = await put(store, 'a\nb');
    expect(await store.readPage(withNl, { offset: 1 })).toMatchObject({ content: 'b\n', lines: 1, totalLines: 2 });
    expect(await store.readPage(without, { offset: 1 })).toMatchObject({ content: 'b', lines: 1, totalLines: 2 });
    expect(await store.readPage(without, { offset: 0, limit: 1 })).toMatchObject({ content: 'a\n', nextOffset: 1 });
    expect((await store.readPage(without)).content).toBe('a\nb');
  });

  it('keeps CRLF line endings as stored and splits only at \\n (a lone \\r is content)', async () => {
    const store = await openStore();
    const crlf = await put(store, 'one\r\ntwo\r\nthree');
    expect(await store.readPage(crlf, { offset: 0, limit: 1 })).toMatchObject({ content: 'one\r\n', totalLines: 3 });
    expect(await store.readPage(crlf, { offset: 1, limit: 1 })).toMatchObject({ content: 'two\r\n' });
    expect(await store.readPage(crlf, { offset: 2 })).toMatchObject({ content: 'three', nextOffset: null });
    const cr = await put(store, 'a\rb\rc\n');
    expect(await store.readPage(cr)).toMatchObject({ content: 'a\rb\rc\n', lines: 1, totalLines: 1 });
  });

  it('reads an empty blob as 0 lines: an empty page with no next page', async () => {
    const store = await openStore();
    const uri = await put(store, '');
    expect(uri).toBe(`artifact://${sha256('')}`);
    expect(await store.readPage(uri)).toMatchObject({
      content: '',
      offset: 0,
      lines: 0,
      totalLines: 0,
      nextOffset: null,
    });
    expect(await store.readPage(uri, { offset: 7 })).toMatchObject({
      content: '',
      offset: 7,
      lines: 0,
      nextOffset: null,
    });
  });

  it('counts blank lines: "\\n" is one empty line, "\\n\\n\\n" three', async () => {
    const store = await openStore();
    expect(await store.readPage(await put(store, '\n'))).toMatchObject({ content: '\n', lines: 1, totalLines: 1 });
    const three = await put(store, '\n\n\n');
    expect(await store.readPage(three, { offset: 1, limit: 1 })).toMatchObject({
      content: '\n',
      totalLines: 3,
      nextOffset: 2,
    });
  });

  it('gives an empty page with nextOffset null at or past the end', async () => {
    const store = await openStore();
    const uri = await put(store, 'x\ny\n');
    for (const offset of [2, 3, 1_000_000, Number.MAX_SAFE_INTEGER]) {
      expect(await store.readPage(uri, { offset })).toMatchObject({
        content: '',
        offset,
        lines: 0,
        totalLines: 2,
        nextOffset: null,
      });
    }
  });

  it(`defaults to offset 0 and ${MAX_PAGE_LINES} lines, and accepts a limit of exactly ${MAX_PAGE_LINES}`, async () => {
    const store = await openStore();
    const lines = Array.from({ length: 2500 }, (_, i) => `line ${i}\n`);
    const uri = await put(store, lines.join(''));
    const first = await store.readPage(uri);
    expect(first).toMatchObject({ offset: 0, lines: 2000, totalLines: 2500, nextOffset: 2000 });
    expect(first.content).toBe(lines.slice(0, 2000).join(''));
    expect(await store.readPage(uri, { limit: 2000, offset: 2000 })).toMatchObject({
      content: lines.slice(2000).join(''),
      lines: 500,
      nextOffset: null,
    });
    // Deep in a blob too small for an index: scanned from the start, still exact.
    expect((await store.readPage(uri, { offset: 2222, limit: 3 })).content).toBe('line 2222\nline 2223\nline 2224\n');
  });

  it.each([
    ['offset', -1, '-1'],
    ['offset', 1.5, '1.5'],
    ['offset', Number.NaN, 'NaN'],
    ['offset', Number.POSITIVE_INFINITY, 'Infinity'],
    ['offset', 2 ** 53, String(2 ** 53)],
    ['offset', '3', '"3"'],
    ['offset', null, 'null'],
    ['limit', 0, '0'],
    ['limit', -5, '-5'],
    ['limit', 2001, '2001'],
    ['limit', 2.5, '2.5'],
    ['limit', Number.NaN, 'NaN'],
    ['limit', '10', '"10"'],
    ['limit', null, 'null'],
  ] as const)('rejects %s %s with EBADARGS quoting the value', async (name, value, quoted) => {
    const store = await openStore();
    const uri = await put(store, 'a\n');
    const err = await store.readPage(uri, { [name]: value as unknown as number }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'EBADARGS' });
    expect((err as Error).message).toContain(`got ${quoted}`);
  });

  it('rejects a malformed URI with EBADURI before touching the store', async () => {
    const store = await openStore();
    for (const uri of [
      'artifact://abc',
      `artifact://${sha256('x')}/a/b`,
      '/etc/passwd',
      `artifact://${sha256('x')}?q`,
    ]) {
      await expect(store.readPage(uri)).rejects.toMatchObject({ code: 'EBADURI' });
    }
  });

  it('reassembles any content exactly from its pages, whatever the limit (fast-check)', async () => {
    const store = await openStore();
    const unit = fc.constantFrom('a', 'b', '\n', '\r', '\r\n', 'é', '€', '😀', ' ', '\n\n');
    await fc.assert(
      fc.asyncProperty(fc.string({ unit, maxLength: 60 }), fc.integer({ min: 1, max: 7 }), async (content, limit) => {
        const uri = await put(store, content);
        const pages = await readAll(store, uri, limit);
        const total = linesOfString(content);
        expect(pages.map((p) => p.content).join('')).toBe(content);
        expect(pages.reduce((n, p) => n + p.lines, 0)).toBe(total);
        for (const p of pages) {
          expect(p.totalLines).toBe(total);
          expect(p.lines).toBe(linesOfString(p.content));
          expect(p.lines).toBeLessThanOrEqual(limit);
        }
        expect(pages.at(-1)?.nextOffset).toBeNull();
      }),
      { numRuns: 300 },
    );
  });
});
