/**
 * The local read cache of an S3 store (a real Ceph RGW): a blob one store
 * instance read whole is read by the next instance on the host from its
 * local copy, with no GET; a damaged copy is dropped and the object read
 * again; a replaced object is never served from the copy of the old one;
 * the cache keeps to its bound, and 0 turns it off.
 */
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { RequestCounts } from '../../store/s3/objects.js';
import { Store } from '../../store/store.js';
import { s3Service } from '../support/s3.js';
import { s3Backend, s3StoreConfig } from './backends.js';
import { expectedPage, flipBit, publishGenerated, tempDir } from './helpers.js';
import { bucketOf } from './s3-gc-helpers.js';

const s3 = await s3Service();

const line = (i: number) => `cached line ${i} ${'y'.repeat(i % 23)}\n`;

function requestsOf(store: Store): RequestCounts {
  return bucketOf(store).objects.requests;
}

/** GETs and GET bytes `fn` cost on `store`. */
async function getsOf(store: Store, fn: () => Promise<unknown>): Promise<{ gets: number; getBytes: number }> {
  const { gets, getBytes } = { ...requestsOf(store) };
  await fn();
  return { gets: requestsOf(store).gets - gets, getBytes: requestsOf(store).getBytes - getBytes };
}

/** Every file in the cache of the local directory `local`, with its size. */
async function cachedFiles(local: string): Promise<Array<{ path: string; size: number }>> {
  const dir = join(local, 'cache', 'sha256');
  const out: Array<{ path: string; size: number }> = [];
  for (const sub of await fsp.readdir(dir).catch(() => [] as string[])) {
    for (const name of await fsp.readdir(join(dir, sub))) {
      const path = join(dir, sub, name);
      out.push({ path, size: (await fsp.stat(path)).size });
    }
  }
  return out;
}

describe.runIf(s3)('the read cache of an S3 store', () => {
  /** A publishing host, and a function opening further store instances on one other host's local directory. */
  async function hosts(): Promise<{ a: Store; local: string; onB: (cacheBytes?: number) => Promise<Store> }> {
    const a = await s3Backend(s3!).openStore();
    const local = join(await tempDir(), 'host-b');
    const onB = async (cacheBytes?: number) => {
      const b = await Store.open(a.locator, {
        localDir: local,
        s3ClientConfig: s3StoreConfig(s3!),
        ...(cacheBytes !== undefined ? { s3CacheBytes: cacheBytes } : {}),
      });
      onTestFinished(() => b.close());
      return b;
    };
    onTestFinished(async () => {
      // Nothing left half-copied (on host B, when the test opened a store there, and on A).
      expect(await fsp.readdir(join(local, 'tmp')).catch(() => [])).toEqual([]);
      expect(await fsp.readdir(a.layout.tmp).catch(() => [])).toEqual([]);
    });
    return { a, local, onB };
  }

  it("makes a second store instance's first read of a large blob cost no GET of its body", async () => {
    const { a, local, onB } = await hosts();
    const blob = await publishGenerated(a, 200_000, line);
    expect(blob.bytes).toBeGreaterThan(4 * 1024 * 1024);
    const uri = `artifact://${blob.digest}`;
    const b1 = await onB();
    const first = await getsOf(b1, () => b1.readPage(uri, { offset: 10, limit: 2 }));
    expect(first.getBytes).toBeGreaterThanOrEqual(blob.bytes);
    const files = await cachedFiles(local);
    expect(files).toEqual([{ path: expect.stringContaining(blob.digest.slice(2)), size: blob.bytes }]);
    const copy = await fsp.readFile(files[0]?.path as string);
    expect(createHash('sha256').update(copy).digest('hex')).toBe(blob.digest);
    // Another instance (another worker thread or process) hashes the local copy: no GET at all.
    const b2 = await onB();
    let page: Awaited<ReturnType<Store['readPage']>> | undefined;
    const second = await getsOf(b2, async () => {
      page = await b2.readPage(uri, { offset: 199_998, limit: 5 });
    });
    expect(second).toEqual({ gets: 0, getBytes: 0 });
    expect(page).toMatchObject({ content: expectedPage(line, 199_998, 200_000), totalLines: 200_000 });
  });

  it('keeps what a store publishes as the copy: the next instance on that host reads it with no GET', async () => {
    const { a } = await hosts();
    const blob = await publishGenerated(a, 200_000, line);
    const uri = `artifact://${blob.digest}`;
    // The publisher itself: its upload is the copy it already knows as verified.
    expect(await getsOf(a, () => a.readPage(uri, { offset: 100_000, limit: 2 }))).toEqual({ gets: 0, getBytes: 0 });
    const a2 = await Store.open(a.locator, { localDir: a.root, s3ClientConfig: s3StoreConfig(s3!) });
    onTestFinished(() => a2.close());
    let page: Awaited<ReturnType<Store['readPage']>> | undefined;
    const cost = await getsOf(a2, async () => {
      page = await a2.readPage(uri, { offset: 199_999 });
    });
    expect(cost).toEqual({ gets: 0, getBytes: 0 });
    expect(page?.content).toBe(line(199_999));
    expect((await cachedFiles(a.root)).map((f) => f.size)).toEqual([blob.bytes]);
    expect(await fsp.readdir(a.layout.tmp)).toEqual([]);
  });

  it('drops a damaged local copy and reads the object again, leaving an intact copy', async () => {
    const { a, local, onB } = await hosts();
    const blob = await publishGenerated(a, 50_000, line);
    const uri = `artifact://${blob.digest}`;
    const b1 = await onB();
    await b1.readPage(uri, { limit: 1 });
    const [file] = await cachedFiles(local);
    await flipBit(file?.path as string, 1000);
    const b2 = await onB();
    let page: Awaited<ReturnType<Store['readPage']>> | undefined;
    const cost = await getsOf(b2, async () => {
      page = await b2.readPage(uri, { offset: 49_999 });
    });
    expect(page?.content).toBe(line(49_999));
    expect(cost.getBytes).toBeGreaterThanOrEqual(blob.bytes);
    const [again] = await cachedFiles(local);
    const bytes = await fsp.readFile(again?.path as string);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(blob.digest);
  });

  it('never serves the copy of an object that was replaced since (a corrupt new version is EINTEGRITY)', async () => {
    const { a, onB } = await hosts();
    const blob = await publishGenerated(a, 20_000, line);
    const uri = `artifact://${blob.digest}`;
    const b1 = await onB();
    await b1.readPage(uri, { limit: 1 });
    await s3Backend(s3!).corruptBlob(a, blob.digest, 500);
    const b2 = await onB();
    await expect(b2.readPage(uri, { limit: 1 })).rejects.toMatchObject({ code: 'EINTEGRITY' });
  });

  it('keeps to its bound, removing the least recently used copies, and caches nothing larger than it', async () => {
    const { a, local, onB } = await hosts();
    const blobs = [];
    for (let i = 0; i < 4; i++) blobs.push(await publishGenerated(a, 10_000 + i, line));
    const size = blobs[0]?.bytes as number;
    const bound = Math.floor(size * 2.5);
    const b = await onB(bound);
    for (const blob of blobs) await b.readPage(`artifact://${blob.digest}`, { limit: 1 });
    const files = await cachedFiles(local);
    expect(files.reduce((n, f) => n + f.size, 0)).toBeLessThanOrEqual(bound);
    // The last two read are the ones kept.
    expect(files.map((f) => f.path.split('/').pop()?.split('.')[0]).sort()).toEqual(
      blobs
        .slice(2)
        .map((x) => x.digest.slice(2))
        .sort(),
    );
    const big = await publishGenerated(a, 40_000, line);
    expect(big.bytes).toBeGreaterThan(bound);
    await b.readPage(`artifact://${big.digest}`, { limit: 1 });
    expect((await cachedFiles(local)).some((f) => f.path.includes(big.digest.slice(2)))).toBe(false);
  });

  it('with a bound of 0 copies nothing, and a bad SLUICE_S3_CACHE_BYTES fails the open with EBADOPTION', async () => {
    const { a, local, onB } = await hosts();
    const blob = await publishGenerated(a, 10_000, line);
    const b = await onB(0);
    await b.readPage(`artifact://${blob.digest}`, { limit: 1 });
    expect(await cachedFiles(local)).toEqual([]);
    const again = await onB(0);
    expect((await getsOf(again, () => again.readPage(`artifact://${blob.digest}`))).getBytes).toBeGreaterThanOrEqual(
      blob.bytes,
    );
    const saved = process.env.SLUICE_S3_CACHE_BYTES;
    process.env.SLUICE_S3_CACHE_BYTES = '1.5e3x';
    try {
      await expect(onB()).rejects.toMatchObject({ code: 'EBADOPTION' });
    } finally {
      if (saved === undefined) delete process.env.SLUICE_S3_CACHE_BYTES;
      else process.env.SLUICE_S3_CACHE_BYTES = saved;
    }
  });
});
