import { describe, expect, it } from 'vitest';
import { MAX_PAGE_BYTES } from '../../store/pages.js';
import type { Store } from '../../store/store.js';
import { STORE_BACKENDS } from './backends.js';
import { countBytesRead } from './helpers.js';

const MiB = 1024 * 1024;

async function put(store: Store, content: string | Buffer): Promise<string> {
  return `artifact://${(await store.publishBytes(content)).digest}`;
}

describe.each(STORE_BACKENDS)('the 2 MiB page bound ($name)', ({ openStore }) => {
  it('is exactly 2 MiB of UTF-8 content', () => {
    expect(MAX_PAGE_BYTES).toBe(2 * MiB);
  });

  it('returns a page of exactly 2 MiB and rejects one byte more with ERESOURCELIMIT, never truncating', async () => {
    const store = await openStore();
    const big = `${'x'.repeat(MiB - 1)}\n`;
    const uri = await put(store, `${big}${big}z\n`);
    const exact = await store.readPage(uri, { offset: 0, limit: 2 });
    expect(Buffer.byteLength(exact.content)).toBe(2 * MiB);
    expect(exact).toMatchObject({ lines: 2, nextOffset: 2, totalLines: 3 });
    await expect(store.readPage(uri, { offset: 0, limit: 3 })).rejects.toMatchObject({
      code: 'ERESOURCELIMIT',
      details: { offset: 0, limit: 3, maxBytes: 2 * MiB },
    });
    // The default limit would take all three lines, so it fails too rather than returning two.
    await expect(store.readPage(uri)).rejects.toMatchObject({ code: 'ERESOURCELIMIT' });
    expect(await store.readPage(uri, { offset: 1 })).toMatchObject({ lines: 2, content: `${big}z\n` });
  });

  it('counts bytes, not characters: 2 MiB of 2-byte characters fits, 2 more bytes do not', async () => {
    const store = await openStore();
    const line = `${'é'.repeat(MiB / 2 - 1)}\n`; // MiB - 1 bytes
    const uri = await put(store, `${line}${line}é\n`);
    expect(Buffer.byteLength((await store.readPage(uri, { limit: 2 })).content)).toBe(2 * MiB - 2);
    await expect(store.readPage(uri, { limit: 3 })).rejects.toMatchObject({ code: 'ERESOURCELIMIT' });
  });

  it('whole lines that would each fit a page fail with ERESOURCELIMIT saying how many fit', async () => {
    const store = await openStore();
    const big = `${'x'.repeat(MiB - 1)}\n`;
    const uri = await put(store, `${big}${big}z\n`);
    await expect(store.readPage(uri, { offset: 0, limit: 3 })).rejects.toMatchObject({
      code: 'ERESOURCELIMIT',
      details: { fits: 2 },
    });
    // A line longer than any page is another matter: the lines before it come back with part of it.
    const huge = 'h'.repeat(3 * MiB);
    const mixed = await put(store, `before\n${huge}\n`);
    expect(await store.readPage(mixed)).toMatchObject({ lines: 2, nextOffset: 1, nextByteOffset: 2 * MiB - 7 });
    expect(await store.readPage(mixed, { limit: 1 })).toMatchObject({ content: 'before\n', nextOffset: 1 });
  });

  it('a single line over 2 MiB comes back in part, with or without a final newline, never silently cut', async () => {
    const store = await openStore();
    const huge = 'h'.repeat(3 * MiB);
    const uri = await put(store, `before\n${huge}\nafter\n${huge}`);
    expect(await store.readPage(uri, { offset: 1, limit: 1 })).toMatchObject({
      lines: 1,
      nextOffset: 1,
      nextByteOffset: 2 * MiB,
      content: huge.slice(0, 2 * MiB),
    });
    // The rest of the line, and the next: whatever follows in that page is whole lines.
    expect(await store.readPage(uri, { offset: 1, byteOffset: 2 * MiB, limit: 2 })).toMatchObject({
      lines: 2,
      nextOffset: 3,
      nextByteOffset: null,
      content: `${huge.slice(2 * MiB)}\nafter\n`,
    });
    // The last line has no newline: its end is the end of the blob.
    expect(await store.readPage(uri, { offset: 3, byteOffset: 2 * MiB })).toMatchObject({
      lines: 1,
      nextOffset: null,
      nextByteOffset: null,
      content: huge.slice(2 * MiB),
    });
    expect(await store.readPage(uri, { offset: 2, limit: 1 })).toMatchObject({ content: 'after\n', nextOffset: 3 });
  });

  it('stops reading once the bound is passed instead of loading the oversized line', async () => {
    const store = await openStore();
    const uri = await put(store, `${'w'.repeat(40 * MiB)}\n`);
    await store.readPage(uri, { offset: 1 }); // the verification read, hashing all 40 MiB
    const { result, bytesRead } = await countBytesRead(() => store.readPage(uri));
    expect(result).toMatchObject({ lines: 1, nextOffset: 0, nextByteOffset: 2 * MiB });
    expect(bytesRead).toBeLessThanOrEqual(2 * MiB + 64 * 1024);
  });
});
