/**
 * The S3 store against a real Ceph RGW, as two hosts see it: two stores on
 * one bucket prefix with separate local directories. What one publishes the
 * other deduplicates against and pages through, each page costing O(page)
 * bytes from the service; the requests of each operation are as
 * docs/store.md states them (GC and verify: test/store/s3-gc.test.ts).
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RequestCounts } from '../../store/s3/objects.js';
import { Store } from '../../store/store.js';
import { s3Service } from '../support/s3.js';
import { s3Backend, s3StoreConfig } from './backends.js';
import { expectedPage, publishGenerated, tempDir } from './helpers.js';
import { bucketOf } from './s3-gc-helpers.js';

// These tests count, damage or delete blob objects: every blob gets an object of its own here (packed
// blobs on S3 are tested in test/store/s3-packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

const s3 = await s3Service();

function requestsOf(store: Store): RequestCounts {
  return bucketOf(store).objects.requests;
}

/** What `fn` cost in requests on `store`. */
async function cost<T>(store: Store, fn: () => Promise<T>): Promise<{ result: T; spent: RequestCounts }> {
  const before = { ...requestsOf(store) };
  const result = await fn();
  const after = requestsOf(store);
  const spent = Object.fromEntries(
    Object.entries(after).map(([k, v]) => [k, v - before[k as keyof RequestCounts]]),
  ) as unknown as RequestCounts;
  return { result, spent };
}

const line = (i: number) => `line ${i} ${'x'.repeat(i % 17)}\n`;

describe.runIf(s3)('S3 store across hosts', () => {
  /** Host A: a fresh store; host B: the same bucket and prefix from its own local directory. */
  async function twoHosts(options: { s3CacheBytes?: number } = {}): Promise<[Store, Store]> {
    const a = await s3Backend(s3!).openStore();
    const b = await Store.open(a.locator, {
      localDir: join(await tempDir(), 'host-b'),
      s3ClientConfig: s3StoreConfig(s3!),
      ...options,
    });
    return [a, b];
  }

  it('a large artifact published on A pages on B, each page after the first read O(page) from the service', async () => {
    // Without B's read cache, which would serve the pages from its local copy (s3-read-cache.test.ts).
    const [a, b] = await twoHosts({ s3CacheBytes: 0 });
    try {
      const count = 300_000;
      const blob = await publishGenerated(a, count, line);
      expect(blob.bytes).toBeGreaterThan(4 * 1024 * 1024);
      const uri = `artifact://${blob.digest}`;
      // B's first read hashes the whole object once (integrity on first read) and copies its index.
      const first = await cost(b, () => b.readPage(uri, { offset: 250_000, limit: 5 }));
      expect(first.result).toMatchObject({ content: expectedPage(line, 250_000, 250_005), totalLines: count });
      expect(first.spent.getBytes).toBeGreaterThanOrEqual(blob.bytes);
      expect((await fsp.stat(b.layout.indexPath(blob.digest))).size).toBeGreaterThan(0);
      for (const offset of [0, 123_456, count - 3]) {
        const page = await cost(b, () => b.readPage(uri, { offset, limit: 3 }));
        expect(page.result.content).toBe(expectedPage(line, offset, Math.min(count, offset + 3)));
        // One HEAD at open, one or two ranged GETs of one block: never the blob.
        expect(page.spent.heads).toBe(1);
        expect(page.spent.gets).toBeLessThanOrEqual(2);
        expect(page.spent.getBytes).toBeLessThanOrEqual(2 * 256 * 1024);
        expect(page.spent.puts).toBe(0);
      }
    } finally {
      await b.close();
    }
  });

  it('publishing costs 1 HEAD and 1 PUT (2 with an index); deduplicating on the other host 1 HEAD and its hash', async () => {
    const [a, b] = await twoHosts();
    try {
      const small = await cost(a, () => a.publishBytes('small output\n'));
      expect(small.result.deduplicated).toBe(false);
      expect(small.spent).toMatchObject({ heads: 1, puts: 1, gets: 0, lists: 0, deletes: 0 });
      const again = await cost(b, () => b.publishBytes('small output\n'));
      expect(again.result).toMatchObject({ digest: small.result.digest, deduplicated: true });
      // B has never verified it: a dedup hashes the object first (one GET for a small one), as the
      // directory store does, so a corrupt object is never taken for the content.
      expect(again.spent).toMatchObject({ heads: 1, puts: 0, gets: 1 });
      const third = await cost(b, () => b.publishBytes('small output\n'));
      expect(third.spent).toMatchObject({ heads: 1, puts: 0, gets: 0 });
      // The dedup's hash left a local copy in B's read cache: reading it costs the HEAD only.
      const read = await cost(b, () => b.readPage(`artifact://${small.result.digest}`));
      expect(read.result.content).toBe('small output\n');
      expect(read.spent).toMatchObject({ heads: 1, gets: 0, puts: 0 });
      const large = await cost(a, () => publishGenerated(a, 100_000, line));
      expect(large.result.bytes).toBeGreaterThan(1024 * 1024);
      expect(large.spent).toMatchObject({ heads: 1, puts: 2, gets: 0 });
      // A's own publication is known good: reading it back hashes nothing again.
      const own = await cost(a, () => a.readPage(`artifact://${large.result.digest}`, { offset: 99_999 }));
      expect(own.result.content).toBe(line(99_999));
      expect(own.spent.getBytes).toBeLessThanOrEqual(256 * 1024);
      expect(await b.hasBlob(large.result.digest)).toBe(true);
      expect(await b.hasBlob('0'.repeat(64))).toBe(false);
    } finally {
      await b.close();
    }
  });

  it('a corrupt object is EINTEGRITY on first read, and publishing its content again heals it', async () => {
    const [a, b] = await twoHosts();
    try {
      const blob = await a.publishBytes('precious\n');
      await s3Backend(s3!).corruptBlob(a, blob.digest, 2);
      await expect(b.readPage(`artifact://${blob.digest}`)).rejects.toMatchObject({
        code: 'EINTEGRITY',
        details: { digest: blob.digest },
      });
      const healed = await b.publishBytes('precious\n');
      expect(healed).toMatchObject({ digest: blob.digest, deduplicated: false });
      expect((await b.readPage(`artifact://${blob.digest}`)).content).toBe('precious\n');
      const c = await Store.open(a.locator, {
        localDir: join(await tempDir(), 'host-c'),
        s3ClientConfig: s3StoreConfig(s3!),
      });
      try {
        expect((await c.readPage(`artifact://${blob.digest}`)).content).toBe('precious\n');
      } finally {
        await c.close();
      }
      expect(await fsp.readdir(b.layout.tmp)).toEqual([]);
    } finally {
      await b.close();
    }
  });

  it('an absent artifact is ENOTFOUND naming the S3 store', async () => {
    const [a, b] = await twoHosts();
    try {
      await expect(b.readPage(`artifact://${'a'.repeat(64)}`)).rejects.toMatchObject({
        code: 'ENOTFOUND',
        details: { digest: 'a'.repeat(64) },
      });
      await expect(a.loadManifest('b'.repeat(64))).rejects.toMatchObject({ code: 'ENOTFOUND' });
    } finally {
      await b.close();
    }
  });

  it('a missing bucket or refused credentials fail the open (ENOTFOUND, EDISK) and create nothing locally', async () => {
    const dir = await tempDir();
    const localDir = join(dir, 'local');
    await expect(
      Store.open(`s3://${s3!.bucket}-absent/p`, { localDir, s3ClientConfig: s3StoreConfig(s3!) }),
    ).rejects.toMatchObject({ code: 'ENOTFOUND', details: { bucket: `${s3!.bucket}-absent` } });
    await expect(
      Store.open(`s3://${s3!.bucket}/p`, {
        localDir,
        s3ClientConfig: { ...s3StoreConfig(s3!), credentials: { accessKeyId: 'NOPE', secretAccessKey: 'nope' } },
      }),
    ).rejects.toMatchObject({ code: 'EDISK', details: { status: 403 } });
    expect(await fsp.readdir(dir)).toEqual([]);
  });
});
