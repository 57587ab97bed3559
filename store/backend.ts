/**
 * Where a store's blobs and line indexes live when they are not files
 * under its directory: the seam of the S3 store. A directory store has no
 * backend (its blobs are `layout.blobPath` files, read and placed as they
 * always were); an S3 store holds one, and the few places that open,
 * place, refresh or look for a blob or an index ask it first:
 *
 * - store/placement.ts: placeBlob, placeIndex (and refreshBlob, which
 *   checks an S3 blob through the integrity read path);
 * - store/integrity.ts: the blob open every read and audit goes through;
 * - store/index-file.ts: the index open;
 * - store/store.ts: hasBlob;
 * - engine/sessions/spill.ts: the spill blob open.
 *
 * Everything else (tmp/, pins/, sessions/, the capture) stays in the local
 * directory, so the directory store's behaviour is unchanged by the seam.
 */
import type { StoreFile } from './file.js';

/** The blobs and indexes of a store kept elsewhere than its directory (see the module comment). */
export interface BlobBackend {
  /** How the backend is written in messages and by `--store` (`s3://bucket/prefix`). */
  readonly url: string;
  /**
   * Publishes the finished temporary file `tmpPath` as blob `digest` and
   * removes it from tmp/; the caller found no intact copy there, so one that is there
   * (corrupt, or being created by another host) is replaced. Returns a handle whose identity (stat) is the placed
   * object's, for the integrity cache, or undefined when it cannot tell or
   * when the file itself became the local copy reads open (an S3 store's
   * read cache): the caller's descriptor of it then has that identity.
   */
  placeBlob(tmpPath: string, digest: string): Promise<StoreFile | undefined>;
  /** Publishes the index file `tmpPath` of blob `digest`; the caller then keeps the file as the local copy. */
  placeIndex(tmpPath: string, digest: string): Promise<void>;
  /** Opens blob `digest` for reading; ENOTFOUND when absent. */
  openBlob(digest: string): Promise<StoreFile>;
  /** Opens the index of blob `digest` (a local copy, fetched once), or undefined when there is none. */
  openIndex(digest: string): Promise<StoreFile | undefined>;
  /**
   * Called by a publisher after `digest` is pinned and before it
   * deduplicates onto or places the blob: waits while a collection on
   * another host may still delete it (store/s3/tombstones.ts).
   */
  settle(digest: string): Promise<void>;
  /**
   * Removes a local copy of blob `digest` that {@link openBlob} may have
   * served (an S3 store's read cache) after it failed its integrity check;
   * true when there was one, so the caller opens the blob again.
   */
  dropCached?(digest: string): Promise<boolean>;
  /**
   * How many blobs the backend holds and their bytes, by a listing (an S3
   * store: one ListObjectsV2 per 1000 blobs), for the store's gauges.
   */
  totals?(): Promise<{ blobs: number; bytes: number }>;
  /** True when blob `digest` exists (content not checked). */
  hasBlob(digest: string): Promise<boolean>;
  /** Releases connections. */
  close(): void;
}

const backends = new WeakMap<object, BlobBackend>();

/** The backend of `store`, or undefined for a directory store. */
export function blobBackendOf(store: object): BlobBackend | undefined {
  return backends.get(store);
}

/** Gives `store` its backend (once, when it opens). */
export function attachBlobBackend(store: object, backend: BlobBackend): void {
  backends.set(store, backend);
}
