import { promises as fsp } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { StoreFile } from '../../store/file.js';
import { realIO, type StoreIO } from '../../store/io.js';
import { Store } from '../../store/store.js';
import { filesUnder, fsError, ioWith, sha256, tempDir, tmpEntries } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

/** Several chunks, so a fault can land after some bytes are already on disk. */
const CHUNKS = [Buffer.from('first chunk\n'), Buffer.from('second chunk\n'), Buffer.from('third chunk\n')];
const DIGEST = sha256(Buffer.concat(CHUNKS));

async function publishChunks(store: Store): Promise<unknown> {
  const w = store.writer();
  try {
    for (const c of CHUNKS) await w.write(c);
  } catch (err) {
    await w.abort();
    throw err;
  }
  return w.commit();
}

type Case = [label: string, errno: string, io: () => Partial<StoreIO>, blobLeft: boolean];

/**
 * Fails the `n`th `op` with `errno`. Operations on the store's reserve
 * (store/space-reserve.ts, made in the background by the first capture
 * file) are not counted: the faults here are the publication's own.
 */
function failNth<K extends keyof StoreIO>(op: K, n: number, errno: string, syscall: string): () => Partial<StoreIO> {
  return () => {
    let calls = 0;
    const reserve = new WeakSet<StoreFile>();
    const real = realIO[op] as (...a: unknown[]) => Promise<unknown>;
    const onReserve = (args: unknown[]) =>
      (typeof args[0] === 'string' && args[0].endsWith('/reserve')) || reserve.has(args[0] as StoreFile);
    const wrapped = (...args: unknown[]) => {
      if (!onReserve(args) && ++calls === n) return Promise.reject(fsError(errno, syscall));
      return real(...args);
    };
    const open = async (path: string, flags: number, mode?: number) => {
      const fh = await (op === 'open'
        ? (wrapped(path, flags, mode) as Promise<StoreFile>)
        : realIO.open(path, flags, mode));
      if (path.endsWith('/reserve')) reserve.add(fh);
      return fh;
    };
    return { [op]: wrapped, open } as Partial<StoreIO>;
  };
}

const cases: Case[] = [];
for (const errno of ['ENOSPC', 'EIO']) {
  cases.push(
    ['creating the temporary file', errno, failNth('open', 1, errno, 'open'), false],
    ['the first write', errno, failNth('write', 1, errno, 'write'), false],
    ['a later write', errno, failNth('write', 3, errno, 'write'), false],
    ['fsync of the file', errno, failNth('fsync', 1, errno, 'fsync'), false],
    ['creating the shard directory', errno, failNth('mkdir', 1, errno, 'mkdir'), false],
    ['the rename into place', errno, failNth('rename', 1, errno, 'rename'), false],
    // The rename happened, so the blob is there, but durability was not confirmed: the publish must fail.
    // The shard directory is opened (the second open) once, and its descriptor kept for the fsyncs after renames.
    ['opening the shard directory', errno, failNth('open', 2, errno, 'open'), true],
    // The second fsync: the directory's, through the descriptor the store keeps open for the shard.
    ['fsync of the directory', errno, failNth('fsync', 2, errno, 'fsync'), true],
  );
}

describe('publication faults', () => {
  it.each(cases)(
    'a fault in %s (%s) fails with EDISK carrying the errno and leaves tmp/ empty',
    async (_label, errno, io, blobLeft) => {
      const store = await Store.open(await tempDir(), { io: ioWith(io()) });
      const err = await publishChunks(store).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'EDISK', details: { errno } });
      expect(await tmpEntries(store)).toEqual([]);
      expect(await store.hasBlob(DIGEST)).toBe(blobLeft);
    },
  );

  it('a fault while refreshing a deduplicated blob places the publisher copy instead; tmp/ ends empty', async () => {
    const dir = await tempDir();
    const first = await Store.open(dir);
    await publishChunks(first);
    const store = await Store.open(dir, { io: ioWith(failNth('utimes', 1, 'EIO', 'utime')()) });
    // The existing blob could not be refreshed: the good copy just written takes its place.
    expect(await publishChunks(store)).toMatchObject({ digest: DIGEST, deduplicated: false });
    expect(await tmpEntries(store)).toEqual([]);
    expect(await fsp.readFile(store.layout.blobPath(DIGEST))).toEqual(Buffer.concat(CHUNKS));
  });

  it('after a failed write, later writes and commit fail with the same error and tmp/ ends empty', async () => {
    const store = await Store.open(await tempDir(), { io: ioWith(failNth('write', 1, 'ENOSPC', 'write')()) });
    const w = store.writer();
    const e1 = await w.write(Buffer.from('a')).catch((e: unknown) => e);
    const e2 = await w.write(Buffer.from('b')).catch((e: unknown) => e);
    const e3 = await w.commit().catch((e: unknown) => e);
    expect(e1).toMatchObject({ code: 'EDISK', details: { errno: 'ENOSPC' } });
    expect(e2).toBe(e1);
    expect(e3).toBe(e1);
    expect(await tmpEntries(store)).toEqual([]);
  });

  it('an aborted writer leaves nothing behind', async () => {
    const store = await Store.open(await tempDir());
    const w = store.writer();
    await w.write(Buffer.from('partial'));
    expect(await tmpEntries(store)).toHaveLength(1);
    await w.abort();
    expect(await tmpEntries(store)).toEqual([]);
    expect(await filesUnder(store.layout.blobs)).toEqual([]);
  });

  it('short writes still store exactly the bytes given', async () => {
    const io = ioWith({ write: (fh, buf, off, len, pos) => realIO.write(fh, buf, off, Math.min(len, 5), pos) });
    const store = await Store.open(await tempDir(), { io });
    const info = await publishChunks(store);
    expect(info).toMatchObject({ digest: DIGEST });
    expect(await fsp.readFile(store.layout.blobPath(DIGEST))).toEqual(Buffer.concat(CHUNKS));
  });

  it('a write that makes no progress fails with EDISK (EIO) instead of hanging', async () => {
    // Regression: a write resolving to 0 bytes looped forever.
    const store = await Store.open(await tempDir(), { io: ioWith({ write: async () => 0 }) });
    await expect(publishChunks(store)).rejects.toMatchObject({ code: 'EDISK', details: { errno: 'EIO' } });
    expect(await tmpEntries(store)).toEqual([]);
  });

  describe('the line index of a large blob is only a cache', () => {
    const big = Buffer.from('index me please\n'.repeat(80_000)); // 1.28 MB: gets an index
    const bigDigest = sha256(big);

    /** I/O whose writes to index temp files fail, while blob writes succeed. */
    function indexWritesFail(): StoreIO {
      const indexHandles = new WeakSet<StoreFile>();
      return ioWith({
        open: async (path, flags, mode) => {
          const fh = await realIO.open(path, flags, mode);
          if (path.endsWith('.idx')) indexHandles.add(fh);
          return fh;
        },
        write: (fh, buf, off, len, pos) =>
          indexHandles.has(fh) ? Promise.reject(fsError('ENOSPC', 'write')) : realIO.write(fh, buf, off, len, pos),
      });
    }

    it.each([
      ['writing it', indexWritesFail],
      [
        'renaming it into place',
        () =>
          ioWith({
            rename: (from, to) =>
              from.endsWith('.idx') ? Promise.reject(fsError('EIO', 'rename')) : realIO.rename(from, to),
          }),
      ],
    ] as const)('a fault while %s still publishes the blob, leaves tmp/ empty, and reads work', async (_l, io) => {
      const dir = await tempDir();
      const store = await Store.open(dir, { io: io() });
      const info = await store.publishBytes(big);
      expect(info).toMatchObject({ digest: bigDigest, deduplicated: false });
      expect(await tmpEntries(store)).toEqual([]);
      expect(await filesUnder(store.layout.index)).toEqual([]);
      // A store with working I/O rebuilds the index on first read.
      const healthy = await Store.open(dir);
      const page = await healthy.readPage(`artifact://${bigDigest}`, { offset: 79_999 });
      expect(page).toMatchObject({ content: 'index me please\n', lines: 1, totalLines: 80_000, nextOffset: null });
      expect(await filesUnder(store.layout.index)).toHaveLength(1);
      expect(await tmpEntries(store)).toEqual([]);
    });
  });
});
