/**
 * The store's blob count and bytes, as its backend counts them (a walk of
 * the directory store's files and packs, or a paged listing of an S3
 * store's blob prefix: store/backend.ts, `totals`). `GET /v1/metrics` and
 * `GET /v1/store` both report it; each walks at most so often.
 */
import type { Store } from '../store/store.js';

/** Blobs and their bytes, and when they were counted (ms since the epoch). */
export interface StoreSize {
  blobs: number;
  bytes: number;
  at: number;
}

/** Counts the blobs of `store` and their bytes, now. */
export async function walkStore(store: Store): Promise<StoreSize> {
  return { ...(await store.backend.totals()), at: Date.now() };
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
    const age = this.store.backend.totalsBy === 'listing' ? Math.max(maxAgeMs, s3Listing.intervalMs) : maxAgeMs;
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
