/**
 * The per-host cache of S3 pack indexes (store/s3/pack-index-cache.ts),
 * against a real Ceph RGW: a fresh store instance on a local directory that
 * read the packs before finds a packed blob with the LIST and the record's
 * GET only; a damaged cache file is refetched, not trusted; verify reads
 * every index from the bucket; the cache keeps to its bound, and a bound of
 * 0 keeps nothing.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { S3Backend } from '../../store/s3/backend.js';
import { Store, type StoreOptions } from '../../store/store.js';
import { s3Service } from '../support/s3.js';
import { s3Backend, s3StoreConfig } from './backends.js';
import { tempDir } from './helpers.js';
import { bucketOf } from './s3-gc-helpers.js';

const s3 = await s3Service();
const PACKS = 6;

/** A store with `PACKS` pack objects of one small blob each (each publish its own PUT), and their texts. */
async function packedStore(): Promise<{ locator: string; texts: string[]; digests: string[] }> {
  const a = await s3Backend(s3!).openStore();
  const texts = Array.from({ length: PACKS }, (_, i) => `packed blob ${i}\n`.repeat(i + 1));
  const digests: string[] = [];
  for (const t of texts) digests.push((await a.publishBytes(t)).digest);
  expect((a.backend as unknown as S3Backend).packObjects.stats.packs).toBe(PACKS);
  return { locator: a.locator, texts, digests };
}

/** A new store instance (a fresh process, as far as the store knows) on local directory `local`. */
async function host(locator: string, local: string, options: StoreOptions = {}): Promise<Store> {
  const store = await Store.open(locator, { localDir: local, s3ClientConfig: s3StoreConfig(s3!), ...options });
  onTestFinished(async () => {
    await store.close().catch(() => {});
    expect(await fsp.readdir(store.layout.tmp)).toEqual([]);
  });
  return store;
}

/** Requests the first read of `digest` costs `store`, and the content read. */
async function firstRead(store: Store, digest: string) {
  const r = bucketOf(store).objects.requests;
  const before = { ...r };
  const page = await store.readPage(`artifact://${digest}`, { offset: 0, limit: 1000 });
  return {
    content: page.content,
    spent: { gets: r.gets - before.gets, heads: r.heads - before.heads, lists: r.lists - before.lists },
  };
}

const stats = (store: Store) => (store.backend as unknown as S3Backend).packObjects.stats;

describe.runIf(s3)('the per-host cache of S3 pack indexes', () => {
  it('a fresh instance on a local directory that read the packs before pays the LIST and the record GET only', async () => {
    const { locator, texts, digests } = await packedStore();
    const local = join(await tempDir(), 'local');

    const cold = await host(locator, local);
    const first = await firstRead(cold, digests[2]!);
    expect(first.content).toBe(texts[2]);
    // The blob's HEAD (no object), one LIST, a tail GET per pack, the record's GET.
    expect(first.spent).toEqual({ heads: 1, lists: 1, gets: PACKS + 1 });
    expect(stats(cold)).toMatchObject({ indexesRead: PACKS, indexesCached: 0 });
    expect(await fsp.readdir(cold.layout.packIndexes)).toHaveLength(PACKS);
    await cold.close();

    const warm = await host(locator, local);
    const second = await firstRead(warm, digests[4]!);
    expect(second.content).toBe(texts[4]);
    expect(second.spent).toEqual({ heads: 1, lists: 1, gets: 1 });
    expect(stats(warm)).toMatchObject({ indexesRead: 0, indexesCached: PACKS });
    for (const [i, d] of digests.entries()) expect((await firstRead(warm, d)).content).toBe(texts[i]);
    // An audit takes no cached index on trust: every one is read from the bucket.
    expect(await warm.verify()).toMatchObject({ packed: PACKS, corrupt: [], unreadablePacks: [] });
    expect(stats(warm)).toMatchObject({ indexesRead: PACKS, indexesCached: PACKS });
  });

  it('a damaged or truncated cache file is removed and its index fetched again, never trusted', async () => {
    const { locator, texts, digests } = await packedStore();
    const local = join(await tempDir(), 'local');
    const cold = await host(locator, local);
    await firstRead(cold, digests[0]!);
    await cold.close();

    const files = (await fsp.readdir(cold.layout.packIndexes)).sort();
    expect(files).toHaveLength(PACKS);
    const flipped = join(cold.layout.packIndexes, files[0]!);
    const bytes = await fsp.readFile(flipped);
    // A digest byte of the first entry: still an index in form, but not the one that was read.
    bytes[8] = (bytes[8] ?? 0) ^ 1;
    await fsp.writeFile(flipped, bytes);
    await fsp.truncate(join(cold.layout.packIndexes, files[1]!), 20);

    const next = await host(locator, local);
    const read = await firstRead(next, digests[5]!);
    expect(read.content).toBe(texts[5]);
    expect(read.spent).toEqual({ heads: 1, lists: 1, gets: 2 + 1 });
    expect(stats(next)).toMatchObject({ indexesRead: 2, indexesCached: PACKS - 2 });
    for (const [i, d] of digests.entries()) expect((await firstRead(next, d)).content).toBe(texts[i]);
    await next.close();

    // Written again whole: the next instance trusts all of them.
    const last = await host(locator, local);
    expect((await firstRead(last, digests[1]!)).spent).toEqual({ heads: 1, lists: 1, gets: 1 });
  });

  it('the cache keeps to its bound (the read cache bound caps it), and a bound of 0 keeps nothing', async () => {
    const { locator, digests } = await packedStore();
    const dir = await tempDir();
    // One index of one blob: 8 bytes of magic, a 48-byte entry, a 32-byte check.
    const small = await host(locator, join(dir, 'small'), { s3CacheBytes: 3 * 88 });
    await firstRead(small, digests[0]!);
    const kept = await fsp.readdir(small.layout.packIndexes);
    expect(kept.length).toBeLessThanOrEqual(3);
    expect(kept.length).toBeGreaterThan(0);
    for (const f of kept) expect((await fsp.stat(join(small.layout.packIndexes, f))).size).toBe(88);

    const off = await host(locator, join(dir, 'off'), { s3CacheBytes: 0 });
    expect((await firstRead(off, digests[0]!)).spent).toMatchObject({ gets: PACKS + 1 });
    expect(await fsp.readdir(off.layout.packIndexes).catch(() => [])).toEqual([]);
  });
});
