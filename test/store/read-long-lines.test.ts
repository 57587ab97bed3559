/**
 * A line longer than the 2 MiB page bound reads back exactly: a page that
 * holds part of one line stops on a code-point boundary with `nextOffset`
 * on the same line and `nextByteOffset` into it, and following the
 * continuations rebuilds the line byte for byte. Reads deep inside a long
 * line cost O(page), because the line index knows where the line ends.
 *
 * A single 3,000,000-byte line must not fail every read with ERESOURCELIMIT
 * ("use a smaller limit", though limit=1 is the smallest).
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MAX_PAGE_BYTES } from '../../store/pages.js';
import type { Store } from '../../store/store.js';
import { STORE_BACKENDS } from './backends.js';
import { countBytesRead, sha256 } from './helpers.js';

const MiB = 1024 * 1024;
const FFFD = '\uFFFD';

/** Follows continuations from line `offset` to the end, handing each page's bytes to `onPage`. */
async function follow(
  store: Store,
  uri: string,
  onPage: (bytes: Buffer, page: { nextOffset: number | null; nextByteOffset: number | null }) => void,
  limit = 1,
): Promise<number> {
  let offset: number | null = 0;
  let byteOffset = 0;
  let pages = 0;
  while (offset !== null) {
    const page = await store.readPageBytes(uri, { offset, limit, byteOffset });
    onPage(page.bytes, page);
    pages++;
    offset = page.nextOffset;
    byteOffset = page.nextByteOffset ?? 0;
  }
  return pages;
}

/** Text of `bytes` bytes: ASCII padding, then 1-, 2-, 3- and 4-byte characters cycling. */
function mixedLine(bytes: number, pad: number): string {
  const unit = 'aé€😀'; // 1 + 2 + 3 + 4 = 10 bytes
  const body = unit.repeat(Math.floor((bytes - pad) / 10));
  return 'p'.repeat(pad) + body + 'q'.repeat(bytes - pad - Buffer.byteLength(body));
}

describe.each(STORE_BACKENDS)('lines longer than a page ($name)', ({ openStore }) => {
  it('a 3 MB line with multi-byte characters at every cut is rebuilt exactly by following continuations', async () => {
    const store = await openStore();
    // Ten paddings put every byte of a 10-byte cycle of 1- to 4-byte characters at the 2 MiB cut.
    for (let pad = 0; pad < 10; pad++) {
      const line = mixedLine(3_000_000, pad);
      const content = `first\n${line}\nlast\n`;
      const { digest } = await store.publishBytes(content);
      const uri = `artifact://${digest}`;
      const parts: Buffer[] = [];
      await follow(store, uri, (bytes, page) => {
        // Every page is valid UTF-8 on its own: no character is split between pages.
        expect(Buffer.from(bytes.toString('utf8'), 'utf8').equals(bytes)).toBe(true);
        if (page.nextByteOffset !== null) expect(bytes.length).toBeGreaterThan(MAX_PAGE_BYTES - 4);
        parts.push(bytes);
      });
      expect(Buffer.concat(parts).toString('utf8')).toBe(content);
      const text = await store.readPage(uri, { offset: 1, limit: 1 });
      expect(text).toMatchObject({ lines: 1, nextOffset: 1, lossy: false });
      expect(text.nextByteOffset).toBe(Buffer.byteLength(text.content));
      expect(Buffer.byteLength(text.content)).toBeLessThanOrEqual(MAX_PAGE_BYTES);
    }
  });

  it('a 100 MB line is read back exactly in pages, and a read deep inside it costs one page', async () => {
    const store = await openStore();
    const w = store.writer();
    const unit = Buffer.from(mixedLine(1_000_000, 3));
    const whole = createHash('sha256');
    for (let i = 0; i < 100; i++) {
      await w.write(unit);
      whole.update(unit);
    }
    const tail = Buffer.from('\nafter\n');
    await w.write(tail);
    whole.update(tail);
    const { digest, bytes, lines } = await w.commit();
    expect({ bytes, lines, digest }).toEqual({ bytes: 100_000_007, lines: 2, digest: whole.digest('hex') });
    const uri = `artifact://${digest}`;
    const rebuilt = createHash('sha256');
    let cuts = 0;
    const pages = await follow(store, uri, (b, page) => {
      rebuilt.update(b);
      if (page.nextByteOffset !== null) {
        cuts++;
        expect(Buffer.from(b.toString('utf8'), 'utf8').equals(b)).toBe(true);
      }
    });
    expect(rebuilt.digest('hex')).toBe(digest);
    expect(cuts).toBe(Math.floor(100_000_001 / MAX_PAGE_BYTES));
    expect(pages).toBe(cuts + 2);
    // Verified once above; now a page 90 MB into the line reads about one page, not 90 MB.
    const { result, bytesRead } = await countBytesRead(() =>
      store.readPageBytes(uri, { offset: 0, limit: 1, byteOffset: 90_000_000 }),
    );
    expect(result).toMatchObject({
      offset: 0,
      lines: 1,
      nextOffset: 0,
      nextByteOffset: 90_000_000 + result.bytes.length,
    });
    expect(bytesRead).toBeLessThanOrEqual(MAX_PAGE_BYTES + 64 * 1024);
    // The last piece of the line and the line after it.
    const end = await store.readPage(uri, { offset: 0, limit: 2, byteOffset: 99_000_000 });
    expect(end).toMatchObject({ lines: 2, nextOffset: null, nextByteOffset: null });
    expect(end.content.endsWith('\nafter\n')).toBe(true);
  });

  it('a byteOffset outside its line is EBADARGS, short lines, long lines and the last line alike', async () => {
    const store = await openStore();
    const long = 'L'.repeat(3 * MiB);
    const { digest } = await store.publishBytes(`short\n${long}\nend`);
    const uri = `artifact://${digest}`;
    const code = (p: Promise<unknown>) =>
      p.then(
        () => 'ok',
        (e: { code?: string }) => e.code,
      );
    // "short\n" is 6 bytes: 5 is its newline (a page of "\n"), 6 would be the next line.
    expect(await store.readPage(uri, { offset: 0, byteOffset: 5, limit: 1 })).toMatchObject({ content: '\n' });
    expect(await code(store.readPage(uri, { offset: 0, byteOffset: 6 }))).toBe('EBADARGS');
    // The long line is 3 MiB + 1 (its newline) long: found from the index for offsets past 64 KiB.
    expect(await code(store.readPage(uri, { offset: 1, byteOffset: 3 * MiB, limit: 1 }))).toBe('ok');
    expect(await code(store.readPage(uri, { offset: 1, byteOffset: 3 * MiB + 1 }))).toBe('EBADARGS');
    expect(await code(store.readPage(uri, { offset: 0, byteOffset: 100_000 }))).toBe('EBADARGS');
    // The last line has no newline: 3 bytes, so 2 is its last byte.
    expect(await store.readPage(uri, { offset: 2, byteOffset: 2 })).toMatchObject({ content: 'd', nextOffset: null });
    expect(await code(store.readPage(uri, { offset: 2, byteOffset: 3 }))).toBe('EBADARGS');
    expect(await code(store.readPage(uri, { offset: 3, byteOffset: 1 }))).toBe('EBADARGS');
    expect(await code(store.readPage(uri, { offset: 0, byteOffset: -1 }))).toBe('EBADARGS');
    expect(await code(store.readPage(uri, { offset: 0, byteOffset: 1.5 }))).toBe('EBADARGS');
  });
});

describe.each(STORE_BACKENDS)('pages around a long line ($name)', ({ openStore }) => {
  it('whole lines before a line longer than a page come back with as much of it as fits', async () => {
    const store = await openStore();
    const long = 'L'.repeat(3 * MiB);
    const { digest } = await store.publishBytes(`a\nbb\n${long}\nz\n`);
    const uri = `artifact://${digest}`;
    const page = await store.readPage(uri);
    expect(page).toMatchObject({ lines: 3, nextOffset: 2, nextByteOffset: MAX_PAGE_BYTES - 5 });
    expect(page.content).toBe(`a\nbb\n${long.slice(0, MAX_PAGE_BYTES - 5)}`);
    // A line that would fit a page of its own is never cut: the reader is told how many lines fit.
    const medium = 'M'.repeat(MiB + 10);
    const { digest: d2 } = await store.publishBytes(`${medium}\n${medium}\n`);
    await expect(store.readPage(`artifact://${d2}`)).rejects.toMatchObject({
      code: 'ERESOURCELIMIT',
      details: { fits: 1 },
    });
  });

  it('a byteOffset inside a character is EBADARGS naming where the character starts', async () => {
    const store = await openStore();
    const { digest } = await store.publishBytes(`${'x'.repeat(10)}€€\n`);
    const uri = `artifact://${digest}`;
    await expect(store.readPage(uri, { byteOffset: 11 })).rejects.toMatchObject({
      code: 'EBADARGS',
      details: { characterStart: 10 },
    });
    expect(await store.readPage(uri, { byteOffset: 13 })).toMatchObject({ content: '€\n', lossy: false });
    // Bytes that are not UTF-8 have no characters to split: any offset inside them is fine.
    const { digest: bad } = await store.publishBytes(Buffer.from([0x61, 0x80, 0x80, 0x0a]));
    expect(await store.readPage(`artifact://${bad}`, { byteOffset: 2 })).toMatchObject({ lossy: true });
  });
});

describe.each(STORE_BACKENDS)('pages of bytes that are not UTF-8 ($name)', ({ openStore }) => {
  it('say lossy, show U+FFFD in their text, and give the exact bytes raw', async () => {
    const store = await openStore();
    const stored = Buffer.from([0x61, 0xff, 0x0a, 0x62, 0xe2, 0x82, 0x0a, 0x63, 0x0a]);
    const { digest } = await store.publishBytes(stored);
    const uri = `artifact://${digest}`;
    expect(await store.readPage(uri, { limit: 2 })).toMatchObject({
      content: `a${FFFD}\nb${FFFD}\n`,
      lines: 2,
      nextOffset: 2,
      lossy: true,
    });
    expect((await store.readPageBytes(uri, { limit: 2 })).bytes).toEqual(stored.subarray(0, 7));
    expect(await store.readPage(uri, { offset: 2 })).toMatchObject({ content: 'c\n', lossy: false });
  });

  it('a line whose text outgrows the bound (each invalid byte shows as 3) is cut on its text and rebuilt raw', async () => {
    const store = await openStore();
    // 1.5 MB of 0xff: 1.5 MB stored, 4.5 MB of U+FFFD as text.
    const bad = Buffer.alloc(1_500_000, 0xff);
    const stored = Buffer.concat([bad, Buffer.from('\nok\n')]);
    const { digest } = await store.publishBytes(stored);
    const uri = `artifact://${digest}`;
    const first = await store.readPage(uri);
    expect(first).toMatchObject({ lines: 1, nextOffset: 0, lossy: true });
    expect(Buffer.byteLength(first.content)).toBeLessThanOrEqual(MAX_PAGE_BYTES);
    expect(first.nextByteOffset).toBe(Math.floor(MAX_PAGE_BYTES / 3));
    const parts: Buffer[] = [];
    await follow(store, uri, (b) => parts.push(b), 2000);
    expect(sha256(Buffer.concat(parts))).toBe(digest);
  });
});
