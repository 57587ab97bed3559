/**
 * The store's blob count and bytes, by a walk of blobs/ one shard directory
 * at a time, then of the packs' locations (each digest counted once). `GET /v1/metrics` and
 * `GET /v1/store` both report it; each walks at most so often.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { listPacks } from '../../store/pack-index.js';
import type { Store } from '../../store/store.js';

/** Blobs and their bytes, and when they were counted (ms since the epoch). */
export interface StoreSize {
  blobs: number;
  bytes: number;
  at: number;
}

const SHARD = /^[0-9a-f]{2}$/;
const BLOB_REST = /^[0-9a-f]{62}$/;

/** Counts the blobs of `store` and their bytes: the blob files, then the packed blobs (each digest once). */
export async function walkStore(store: Store): Promise<StoreSize> {
  const blobsDir = store.layout.blobs;
  let blobs = 0;
  let bytes = 0;
  const seen = new Set<string>();
  const shards = await fsp.readdir(blobsDir).catch(() => [] as string[]);
  for (const shard of shards) {
    if (!SHARD.test(shard)) continue;
    const names = await fsp.readdir(join(blobsDir, shard)).catch(() => [] as string[]);
    for (const name of names) {
      if (!BLOB_REST.test(name)) continue;
      const st = await fsp.lstat(join(blobsDir, shard, name)).catch(() => undefined);
      if (!st?.isFile()) continue;
      blobs++;
      bytes += st.size;
      seen.add(shard + name);
    }
  }
  for (const pack of await listPacks(store).catch(() => [])) {
    for (const e of pack.entries) {
      if (seen.has(e.digest)) continue;
      seen.add(e.digest);
      blobs++;
      bytes += e.length;
    }
  }
  return { blobs, bytes, at: Date.now() };
}

/**
 * One store's last walk, redone when older than `maxAgeMs`; requests at once
 * share one walk, and {@link invalidate} (after a collection) forces the next.
 */
export class StoreSizeCache {
  private size: StoreSize | undefined;
  private walking: Promise<StoreSize> | undefined;

  constructor(private readonly store: Store) {}

  /** The counts, walking again when the last walk is older than `maxAgeMs`. */
  async get(maxAgeMs: number): Promise<StoreSize> {
    if (this.size && Date.now() - this.size.at < maxAgeMs) return this.size;
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
