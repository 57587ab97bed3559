/**
 * The reads of a search pass (store/search-reader.ts) on a real file: each
 * chunk holds exactly the blob's bytes after the bytes carried from the one
 * before, reads follow on without gaps or overlaps from any starting byte to
 * the end, with several reads under way, when the handle gives short reads
 * (as a ranged GET or a network file system may), and a failed read is
 * reported by the chunk that needed it, with no read left under way.
 */
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type BlobHandle, fileHandle } from '../../store/blob-handle.js';
import { READ_STORE_FILE, StoreFile } from '../../store/file.js';
import { ReadAhead, type ReadAheadShape } from '../../store/search-reader.js';
import { fsError, tempDir } from './helpers.js';

/** A handle on `path` whose reads return at most `most` bytes each, counting the reads under way. */
async function openFile(path: string, most = Number.POSITIVE_INFINITY) {
  const h = fileHandle(await StoreFile.open(path, READ_STORE_FILE));
  const state = { underWay: 0, reads: 0, failAt: -1 };
  const handle: BlobHandle = {
    ...h,
    read: async (buffer, offset, length, position) => {
      state.underWay++;
      try {
        if (state.reads++ === state.failAt) throw fsError('EIO', 'read');
        return await h.read(buffer, offset, Math.min(length, most), position);
      } finally {
        state.underWay--;
      }
    },
  };
  return { handle, state };
}

/** Every chunk from `from` to the end, carrying `carryOf(chunk)` bytes each time, checked against `data`. */
async function readAll(
  handle: BlobHandle,
  data: Buffer,
  from: number,
  shape: ReadAheadShape,
  carryOf: (n: number) => number,
) {
  const reader = new ReadAhead(handle, from, data.length, shape);
  let carry = 0;
  let covered = from;
  let chunks = 0;
  try {
    for (;;) {
      const c = await reader.next(carry);
      chunks++;
      // The carried bytes, then the read's, are the blob's own bytes at their offsets.
      expect(c.end - c.start - carry).toBeLessThanOrEqual(shape.readBytes);
      expect(c.base + c.start).toBe(covered - carry);
      expect(c.buf.subarray(c.start, c.end).equals(data.subarray(c.base + c.start, c.base + c.end))).toBe(true);
      covered = c.base + c.end;
      if (c.atEof) break;
      carry = Math.min(carryOf(c.end - c.start), shape.carryBytes, c.end - c.start);
    }
  } finally {
    await reader.close();
  }
  expect(covered).toBe(data.length);
  return chunks;
}

describe('the reads of a search pass', () => {
  it('hand out the blob read after read, with the carried bytes in front, from any start', async () => {
    const dir = await tempDir('sluice-search-reader-');
    const data = randomBytes(5 * 4096 + 123);
    const path = join(dir, 'blob');
    await fsp.writeFile(path, data);
    for (const depth of [1, 2, 3]) {
      const shape = { readBytes: 4096, carryBytes: 1024, depth };
      for (const most of [Number.POSITIVE_INFINITY, 1000, 4095]) {
        for (const from of [0, 1, 4095, 4096, 5 * 4096, data.length - 1]) {
          for (const carryOf of [() => 0, (n: number) => n, (n: number) => n % 700]) {
            const { handle, state } = await openFile(path, most);
            const chunks = await readAll(handle, data, from, shape, carryOf);
            expect(chunks).toBe(Math.max(1, Math.ceil((data.length - from) / 4096)));
            expect(state.underWay).toBe(0);
            await handle.close();
          }
        }
      }
    }
  });

  it('gives one empty chunk at the end for a start at the end, and refuses to carry more than it may', async () => {
    const dir = await tempDir('sluice-search-reader-');
    const data = randomBytes(3000);
    const path = join(dir, 'blob');
    await fsp.writeFile(path, data);
    const { handle } = await openFile(path);
    const shape = { readBytes: 1024, carryBytes: 256, depth: 2 };
    const end = new ReadAhead(handle, data.length, data.length, shape);
    expect(await end.next()).toMatchObject({ atEof: true, start: 0, end: 0 });
    await expect(end.next()).rejects.toThrow(RangeError);
    await end.close();
    const r = new ReadAhead(handle, 0, data.length, shape);
    await r.next();
    await expect(r.next(257)).rejects.toThrow(RangeError);
    await r.close();
    await handle.close();
  });

  it('reports a failed read on the chunk that needed it and leaves no read under way', async () => {
    const dir = await tempDir('sluice-search-reader-');
    const data = randomBytes(10 * 1024);
    const path = join(dir, 'blob');
    await fsp.writeFile(path, data);
    const { handle, state } = await openFile(path);
    state.failAt = 3;
    const reader = new ReadAhead(handle, 0, data.length, { readBytes: 1024, carryBytes: 256, depth: 2 });
    for (let i = 0; i < 3; i++) expect((await reader.next()).atEof).toBe(false);
    await expect(reader.next()).rejects.toMatchObject({ code: 'EIO' });
    await reader.close();
    expect(state.underWay).toBe(0);
    await handle.close();
  });
});
