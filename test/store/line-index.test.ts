import { promises as fsp } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { realIO } from '../../store/io.js';
import { INDEX_EVERY_BYTES, INDEX_EVERY_LINES, INDEX_MIN_BLOB_BYTES } from '../../store/line-index.js';
import { Store } from '../../store/store.js';
import {
  countBytesRead,
  expectedPage,
  filesUnder,
  fsError,
  ioWith,
  publishGenerated,
  tempDir,
  tmpEntries,
} from './helpers.js';

const LF = 0x0a;

const E = Array.from({ length: 11 }, (_, k) => 'é'.repeat(k));
const X = Array.from({ length: 61 }, (_, k) => 'x'.repeat(k));

/** Variable-length lines with 2- and 4-byte characters, so entries land after all kinds of bytes. */
function line(i: number): string {
  return `${i}\t${E[i % 11]}${i % 3 === 0 ? '😀' : ''}${X[i % 61]}\n`;
}

/** Bytes of `line(i)` in UTF-8, without building it. */
function lineBytes(i: number): number {
  return String(i).length + 1 + 2 * (i % 11) + (i % 3 === 0 ? 4 : 0) + (i % 61) + 1;
}

/** A ~3 MB blob from `line`, written in one go (small enough to hold in a test). */
const MEDIUM_LINES = 60_000;
const MEDIUM = Buffer.from(expectedPage(line, 0, MEDIUM_LINES));

interface ParsedIndex {
  magic: string;
  bytes: number;
  lines: number;
  entries: { line: number; byte: number }[];
  fileSize: number;
}

async function parseIndex(path: string): Promise<ParsedIndex> {
  const buf = await fsp.readFile(path);
  const entries: { line: number; byte: number }[] = [];
  for (let at = 32; at + 16 <= buf.length; at += 16) {
    entries.push({ line: Number(buf.readBigUInt64LE(at)), byte: Number(buf.readBigUInt64LE(at + 8)) });
  }
  return {
    magic: buf.toString('latin1', 0, 8),
    bytes: Number(buf.readBigUInt64LE(8)),
    lines: Number(buf.readBigUInt64LE(16)),
    entries,
    fileSize: buf.length,
  };
}

async function publishMedium(): Promise<{ dir: string; store: Store; digest: string; indexPath: string }> {
  const dir = await tempDir();
  const store = await Store.open(dir);
  const { digest } = await store.publishBytes(MEDIUM);
  return { dir, store, digest, indexPath: store.layout.indexPath(digest) };
}

/** Deep reads through a fresh store: each must equal the generator's lines. */
async function expectDeepPagesRight(dir: string, digest: string): Promise<Store> {
  const store = await Store.open(dir);
  for (const offset of [0, 1, 1023, 1024, 1025, 31_337, MEDIUM_LINES - 2000, MEDIUM_LINES - 1]) {
    const page = await store.readPage(`artifact://${digest}`, { offset, limit: 50 });
    expect(page.content).toBe(expectedPage(line, offset, Math.min(offset + 50, MEDIUM_LINES)));
  }
  return store;
}

describe('the sparse line index', () => {
  it('is written beside blobs of at least INDEX_MIN_BLOB_BYTES, and only those', async () => {
    const store = await Store.open(await tempDir());
    const below = await store.publishBytes(Buffer.alloc(INDEX_MIN_BLOB_BYTES - 1, LF));
    const at = await store.publishBytes(Buffer.alloc(INDEX_MIN_BLOB_BYTES, LF));
    expect(await filesUnder(store.layout.index)).toEqual([`${at.digest.slice(0, 2)}/${at.digest.slice(2)}.idx`]);
    expect(below.lines).toBe(INDEX_MIN_BLOB_BYTES - 1);
  });

  it('has a test generator whose byte lengths are what it claims', () => {
    for (const i of [0, 1, 2, 3, 10, 60, 61, 999, 123_456]) expect(lineBytes(i)).toBe(Buffer.byteLength(line(i)));
  });

  it('records real line starts, by the 1024-line / 64 KiB spacing rule, with a header matching the blob', async () => {
    const { digest, indexPath } = await publishMedium();
    const idx = await parseIndex(indexPath);
    expect(idx).toMatchObject({ magic: 'SLXIDX01', bytes: MEDIUM.length, lines: MEDIUM_LINES });
    expect(idx.fileSize).toBe(32 + 16 * idx.entries.length);
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    // Walk every line start and check each entry is exactly where the rule puts one.
    let lineNo = 0;
    let last = { line: 0, byte: 0 };
    let e = 0;
    for (let i = 0; i < MEDIUM.length; i++) {
      if (MEDIUM[i] !== LF) continue;
      lineNo++;
      const start = i + 1;
      const due = lineNo - last.line >= INDEX_EVERY_LINES || start - last.byte >= INDEX_EVERY_BYTES;
      if (due) {
        expect(idx.entries[e]).toEqual({ line: lineNo, byte: start });
        last = { line: lineNo, byte: start };
        e++;
      }
    }
    expect(e).toBe(idx.entries.length);
  });

  it('is rebuilt on first read when missing, identical to the one written at publish', async () => {
    const { dir, digest, indexPath } = await publishMedium();
    const original = await fsp.readFile(indexPath);
    await fsp.unlink(indexPath);
    const store = await expectDeepPagesRight(dir, digest);
    expect((await fsp.readFile(indexPath)).equals(original)).toBe(true);
    expect(await tmpEntries(store)).toEqual([]);
  });

  type Damage = [label: string, damage: (path: string, idx: ParsedIndex) => Promise<void>];
  const damages: Damage[] = [
    ['a wrong magic', (p) => writeAt(p, 0, Buffer.from('SLXIDX02'))],
    ['a header for another blob size', (p, idx) => writeU64(p, 8, idx.bytes + 1)],
    ['a header with the wrong line count', (p, idx) => writeU64(p, 16, idx.lines - 1)],
    ['an entry count that does not fit the file', (p, idx) => writeU64(p, 24, idx.entries.length + 1)],
    ['a truncated file', (p, idx) => fsp.truncate(p, idx.fileSize - 8)],
    ['an empty file', (p) => fsp.truncate(p, 0)],
    // Not at a line start: the byte before it is not \n.
    ['an entry shifted off its line start', (p, idx) => writeU64(p, 32 + 16 * 7 + 8, (idx.entries[7]?.byte ?? 0) + 1)],
    // Plausible (a real line start, the byte before is \n) but the wrong line number: only a full comparison sees it.
    [
      'an entry with a plausible wrong line number',
      (p, idx) => writeU64(p, 32 + 16 * 7, (idx.entries[7]?.line ?? 0) + 1),
    ],
    ['entries out of order', (p, idx) => writeU64(p, 32 + 16 * 3, (idx.entries[9]?.line ?? 0) + 5)],
  ];

  async function writeAt(path: string, position: number, data: Buffer): Promise<void> {
    const fh = await fsp.open(path, 'r+');
    await fh.write(data, 0, data.length, position);
    await fh.close();
  }
  async function writeU64(path: string, position: number, value: number): Promise<void> {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(value));
    await writeAt(path, position, b);
  }

  it.each(damages)('with %s is replaced on first read, and pages stay exact', async (_label, damage) => {
    const { dir, digest, indexPath } = await publishMedium();
    const original = await fsp.readFile(indexPath);
    await damage(indexPath, await parseIndex(indexPath));
    expect((await fsp.readFile(indexPath)).equals(original)).toBe(false);
    const store = await expectDeepPagesRight(dir, digest);
    expect((await fsp.readFile(indexPath)).equals(original)).toBe(true);
    expect(await tmpEntries(store)).toEqual([]);
  });

  it('damaged after the blob was verified is caught at lookup and rebuilt, and pages stay exact', async () => {
    const { dir, digest, indexPath } = await publishMedium();
    const original = await fsp.readFile(indexPath);
    const store = await Store.open(dir);
    const uri = `artifact://${digest}`;
    expect((await store.readPage(uri, { offset: 40_000, limit: 2 })).content).toBe(expectedPage(line, 40_000, 40_002));
    const idx = await parseIndex(indexPath);
    // Shift every entry one byte: each now points just past a non-newline byte.
    const fh = await fsp.open(indexPath, 'r+');
    for (let i = 0; i < idx.entries.length; i++) {
      const b = Buffer.alloc(8);
      b.writeBigUInt64LE(BigInt((idx.entries[i]?.byte ?? 0) + 1));
      await fh.write(b, 0, 8, 32 + 16 * i + 8);
    }
    await fh.close();
    expect((await store.readPage(uri, { offset: 50_001, limit: 3 })).content).toBe(expectedPage(line, 50_001, 50_004));
    expect((await fsp.readFile(indexPath)).equals(original)).toBe(true);
  });

  it.each([
    ['creating its temporary file', () => ioWith({ open: failIdx(realIO.open, 'ENOSPC', 'open') })],
    ['writing it', () => writeFailsForIdx()],
    ['renaming it into place', () => ioWith({ rename: failIdx(realIO.rename, 'EIO', 'rename') })],
  ])('that cannot be rebuilt because of a fault %s leaves tmp/ empty and reads exact', async (_label, io) => {
    const { dir, digest, indexPath } = await publishMedium();
    await fsp.unlink(indexPath);
    const store = await Store.open(dir, { io: io() });
    for (const offset of [0, 33_333, MEDIUM_LINES - 1]) {
      const page = await store.readPage(`artifact://${digest}`, { offset, limit: 10 });
      expect(page.content).toBe(expectedPage(line, offset, Math.min(offset + 10, MEDIUM_LINES)));
    }
    expect(await tmpEntries(store)).toEqual([]);
    expect(await filesUnder(store.layout.index)).toEqual([]);
    // Having failed once, a store does not retry a full rebuild on every read: a deep read scans to its page only.
    const again = await countBytesRead(() => store.readPage(`artifact://${digest}`, { offset: 30_000, limit: 10 }));
    expect(again.result.content).toBe(expectedPage(line, 30_000, 30_010));
    expect(again.bytesRead).toBeLessThan(MEDIUM.length * 0.75);
  });

  it('makes a deep page cost about a page of reading, not the offset', async () => {
    const { dir, digest } = await publishMedium();
    const store = await Store.open(dir);
    const uri = `artifact://${digest}`;
    await store.readPage(uri, { limit: 1 }); // verification
    const first = await countBytesRead(() => store.readPage(uri, { offset: 0, limit: 100 }));
    const deep = await countBytesRead(() => store.readPage(uri, { offset: 55_555, limit: 100 }));
    expect(deep.result.content).toBe(expectedPage(line, 55_555, 55_655));
    // The deep page starts ~2.8 MB in; reading is bounded by skip (< 64 KiB) + page + read granularity.
    expect(deep.bytesRead).toBeLessThan(first.bytesRead + INDEX_EVERY_BYTES + 8 * 1024);
  });
});

function failIdx<A extends unknown[], R>(
  real: (path: string, ...rest: A) => Promise<R>,
  errno: string,
  syscall: string,
): (path: string, ...rest: A) => Promise<R> {
  return (path, ...rest) => (path.endsWith('.idx') ? Promise.reject(fsError(errno, syscall)) : real(path, ...rest));
}

function writeFailsForIdx() {
  const handles = new WeakSet<object>();
  return ioWith({
    open: async (path, flags, mode) => {
      const fh = await realIO.open(path, flags, mode);
      if (path.endsWith('.idx')) handles.add(fh);
      return fh;
    },
    write: (fh, buf, off, len, pos) =>
      handles.has(fh) ? Promise.reject(fsError('EIO', 'write')) : realIO.write(fh, buf, off, len, pos),
  });
}

describe('a 64 MiB artifact streamed through the writer', () => {
  it('reads deep pages equal to the generated lines, each for about the cost of a page', async () => {
    const dir = await tempDir();
    const store = await Store.open(dir);
    const target = 64 * 1024 * 1024;
    let count = 0;
    for (let bytes = 0; bytes < target; count++) bytes += lineBytes(count);
    const info = await publishGenerated(store, count, line);
    expect(info.bytes).toBeGreaterThanOrEqual(target);
    expect(info.lines).toBe(count);
    const reader = await Store.open(dir);
    const uri = `artifact://${info.digest}`;
    const first = await reader.readPage(uri); // verifies: hashes all 64 MiB once
    expect(first.content).toBe(expectedPage(line, 0, 2000));
    expect(first).toMatchObject({ lines: 2000, totalLines: count, nextOffset: 2000 });
    for (const offset of [1024, Math.floor(count / 3) - 1, Math.floor(count / 2) + 7, count - 2000, count - 1]) {
      const { result: page, bytesRead } = await countBytesRead(() => reader.readPage(uri, { offset }));
      const end = Math.min(offset + 2000, count);
      expect(page.content).toBe(expectedPage(line, offset, end));
      expect(page).toMatchObject({ offset, lines: end - offset, nextOffset: end < count ? end : null });
      expect(bytesRead).toBeLessThan(512 * 1024);
    }
    expect(await tmpEntries(reader)).toEqual([]);
  });
});
