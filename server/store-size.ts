/**
 * The store's blob count and bytes, by a walk of blobs/ one shard directory
 * at a time, then of the packs' locations (each digest counted once); for
 * an S3 store, by a paged listing of the bucket's blob prefix. `GET /v1/metrics` and
 * `GET /v1/store` both report it; each walks at most so often.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { blobBackendOf } from '../store/backend.js';
import { packIndexOf, type Store } from '../store/store.js';

/** Blobs and their bytes, and when they were counted (ms since the epoch). */
export interface StoreSize {
  blobs: number;
  bytes: number;
  at: number;
}

const SHARD = /^[0-9a-f]{2}$/;
const BLOB_REST = /^[0-9a-f]{62}$/;

/**
 * Counts the blobs of `store` and their bytes, blob files then packed blobs
 * (each digest once), from the store's own map of packs: no set of every
 * digest is built.
 */
export async function walkStore(store: Store): Promise<StoreSize> {
  // An S3 store's blobs are objects: a paged listing of the bucket's blob prefix (nothing is local).
  const backend = blobBackendOf(store);
  if (backend?.totals) return { ...(await backend.totals()), at: Date.now() };
  const packed = packIndexOf(store);
  await packed.refresh().catch(() => {});
  const totals = packed.totals();
  let blobs = totals.blobs;
  let bytes = totals.bytes;
  const blobsDir = store.layout.blobs;
  const shards = await fsp.readdir(blobsDir).catch(() => [] as string[]);
  for (const shard of shards) {
    if (!SHARD.test(shard)) continue;
    const names = await fsp.readdir(join(blobsDir, shard)).catch(() => [] as string[]);
    for (const name of names) {
      if (!BLOB_REST.test(name)) continue;
      // Packed as well (a threshold changed, a file published before packs): counted once, as packed.
      if (packed.known(shard + name)) continue;
      const st = await fsp.lstat(join(blobsDir, shard, name)).catch(() => undefined);
      if (!st?.isFile()) continue;
      blobs++;
      bytes += st.size;
    }
  }
  return { blobs, bytes, at: Date.now() };
}

/** Least time between two listings of an S3 store's blobs, so frequent scrapes of a large bucket do not LIST per scrape (tests set it to 0). @internal */
export const s3Listing = { intervalMs: 5 * 60_000 };

/**
 * One store's last walk, redone when older than `maxAgeMs`; requests at once
 * share one walk, and {@link invalidate} (after a collection) forces the next.
 */
export class StoreSizeCache {
  private size: StoreSize | undefined;
  private walking: Promise<StoreSize> | undefined;

  constructor(private readonly store: Store) {}

  /**
   * The counts, walking again when the last walk is older than `maxAgeMs`
   * (for an S3 store, at least {@link s3Listing}'s interval: its walk is a
   * listing of the bucket, paid per request).
   */
  async get(maxAgeMs: number): Promise<StoreSize> {
    const age = blobBackendOf(this.store) ? Math.max(maxAgeMs, s3Listing.intervalMs) : maxAgeMs;
    if (this.size && Date.now() - this.size.at < age) return this.size;
    this.walking ??= walkStore(this.store).finally(() => {
      this.walking = undefined;
    });
    this.size = await this.walking;
    return this.size;
  }

  /** Forgets the last walk: the store changed. */
  invalidate(): void {
    this.size = undefined;
  }
}
