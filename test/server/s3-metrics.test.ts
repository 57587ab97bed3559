/**
 * The store gauges of an engine on an S3 store (a real Ceph RGW):
 * `sluice_store_blobs` and `sluice_store_bytes` count the bucket's blob
 * objects (not the local directory, which holds none), by a listing that a
 * scrape repeats only once the listing interval has passed.
 */
import { createRequire } from 'node:module';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterEach, describe, expect, it } from 'vitest';
import { renderMetrics, storeWalk } from '../../server/metrics.js';
import { s3Listing } from '../../server/store-size.js';
import { requestsOf, twoHosts } from '../sessions/s3-hosts.js';
import { s3Service } from '../support/s3.js';

// The gauges are checked against a listing of blob objects: every blob gets one here (packed blobs are
// counted in test/store/s3-packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

const s3 = await s3Service();

interface Family {
  name: string;
  metrics: Array<{ value?: string }>;
}
const parse = createRequire(import.meta.url)('parse-prometheus-text-format') as (text: string) => Family[];

const saved = { walk: storeWalk.intervalMs, listing: s3Listing.intervalMs };
afterEach(() => {
  storeWalk.intervalMs = saved.walk;
  s3Listing.intervalMs = saved.listing;
});

/** The store gauges of one scrape. */
async function gauges(engine: Parameters<typeof renderMetrics>[0]): Promise<{ blobs: number; bytes: number }> {
  const families = parse((await renderMetrics(engine)).text);
  const value = (name: string) => Number(families.find((f) => f.name === name)?.metrics[0]?.value);
  return { blobs: value('sluice_store_blobs'), bytes: value('sluice_store_bytes') };
}

/** The blob objects under `prefix`, counted behind the store's back. */
async function bucketBlobs(prefix: string): Promise<{ blobs: number; bytes: number }> {
  const out = await s3!.client.send(new ListObjectsV2Command({ Bucket: s3!.bucket, Prefix: `${prefix}/blobs/` }));
  const all = out.Contents ?? [];
  return { blobs: all.length, bytes: all.reduce((n, o) => n + (o.Size ?? 0), 0) };
}

describe.runIf(s3)('store gauges of an S3 store', () => {
  it("count the bucket's blobs, listing it again only once the listing interval has passed", async () => {
    const { a, prefix } = await twoHosts(s3!);
    storeWalk.intervalMs = 0;
    await a.run('bash', { command: 'seq 1 1000' }, { session: 'm' });
    const first = await gauges(a);
    expect(first).toEqual(await bucketBlobs(prefix));
    // A manifest, its stdout and the empty stderr; records and indexes are not blobs.
    expect(first.blobs).toBe(3);
    await a.run('bash', { command: 'seq 1 2000' });
    // Within the listing interval a scrape reports the last listing and costs no request.
    const lists = requestsOf(a.store).lists;
    expect(await gauges(a)).toEqual(first);
    expect(requestsOf(a.store).lists).toBe(lists);
    s3Listing.intervalMs = 0;
    const later = await gauges(a);
    expect(later).toEqual(await bucketBlobs(prefix));
    expect(later.blobs).toBe(5);
    // One LIST of blobs/, one of packs/ (another host may pack what this one does not).
    expect(requestsOf(a.store).lists).toBe(lists + 2);
  });
});
