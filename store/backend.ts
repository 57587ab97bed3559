/**
 * Where a store keeps its blobs and line indexes, and all that depends on
 * where: a local directory (store/directory/backend.ts) or an S3 bucket
 * (store/s3/backend.ts). The rest of the store never asks which kind it has;
 * what only one kind has is a capability undefined on the other.
 */
import type { BlobHandle } from './blob-handle.js';
import type { DirectoryPacks } from './directory/packs.js';
import type { StoreFile } from './file.js';
import type { CollectHooks, GcOptions, GcReport } from './gc/collect.js';
import type { Pin, PinJournal } from './pins.js';
import type { S3Objects } from './s3/objects.js';
import type { SpaceReserve } from './space-reserve.js';
import type { Store } from './store.js';
import type { VerifyOptions, VerifyReport } from './verify.js';

/** A store's pins: the local pin journal (store/pins.ts), or an S3 store's lease (store/s3/lease.ts). */
export type PinStore = Pick<PinJournal, 'pin' | 'close' | 'flushInMemory'>;

/** The bucket of an S3 store, for what keeps objects of its own beside the blobs (session records). */
export interface S3Bucket {
  readonly objects: S3Objects;
  /** What every key of this store starts with: `''`, or the prefix and `/`. */
  readonly keyBase: string;
}

/** Small blobs packed into objects, a batch of publishes per object (an S3 store: store/s3/packs.ts). */
export interface ObjectPacks {
  /** Blobs of at most this many bytes are packed (0: none). */
  readonly maxBlobBytes: number;
  /**
   * Packs `content` under `pin` (the lease covers its pack before the upload);
   * resolves once stored, or at once with `deferred` and a pin, whose
   * {@link Pin.vouch} then waits for the upload (and fails with it).
   */
  publish(digest: string, content: Uint8Array, lines: number, pin: Pin | undefined, deferred: boolean): Promise<void>;
}

/** The blobs and indexes of one store (see the module comment). */
export interface StoreBackend {
  /** What a collection of this backend reads. */
  readonly pins: PinStore;
  /** False when placing uploads: the object is durable when the upload returns, so the file needs no fsync. */
  readonly placesLocally: boolean;
  /** How {@link totals} counts: a walk of local files, or a listing paid per request. */
  readonly totalsBy: 'walk' | 'listing';
  /** A directory store's packs of small blobs. */
  readonly packs: DirectoryPacks | undefined;
  /** An S3 store's packs of small blobs. */
  readonly objectPacks: ObjectPacks | undefined;
  /** A directory store's room to finish calls on a full disk. */
  readonly reserve: SpaceReserve | undefined;
  readonly bucket: S3Bucket | undefined;

  /** Any copy, not yet verified. @throws ENOTFOUND; EINTEGRITY for a symbolic link at its address; EDISK. */
  openBlob(digest: string): Promise<BlobHandle>;
  /** The blob's own file or object, never a packed copy: what a deduplicating publisher checks. */
  openBlobFile(digest: string): Promise<BlobHandle>;
  /** Undefined when there is none: the index is a cache. */
  openIndex(digest: string): Promise<StoreFile | undefined>;
  /** Content not checked. */
  hasBlob(digest: string): Promise<boolean>;
  /** Drops a cached copy that failed its check; true when there was one, so the caller opens again. */
  dropCached(digest: string): Promise<boolean>;

  /** After pinning, before deduplicating or placing: waits while a collection elsewhere may delete it. */
  settle(digest: string): Promise<void>;
  /**
   * True when the blob is present, `bytes` long and intact, its age refreshed
   * for a concurrent collection; false makes the caller place its own copy,
   * which heals a corrupt one.
   */
  refreshBlob(digest: string, bytes: number): Promise<boolean>;
  /** Replaces whatever is there; returns the placed copy's handle when the caller's descriptor lacks its identity. */
  placeBlob(tmpPath: string, digest: string): Promise<StoreFile | undefined>;
  /** No fsync: the index is a cache, checked on use. */
  placeIndex(tmpPath: string, digest: string): Promise<void>;

  /** For the store's gauges. */
  totals(): Promise<{ blobs: number; bytes: number }>;
  /** docs/operations.md, "Garbage collection". @throws EBADOPTION; ETIMEOUT when another collection holds the lock; EDISK. */
  collect(hooks: CollectHooks, options?: GcOptions): Promise<GcReport>;
  /** See {@link Store.verify}. */
  verify(options?: VerifyOptions): Promise<VerifyReport>;
  close(): Promise<void>;
}

/** A backend made ready by Store.open before its store exists (an S3 store's connected bucket). */
export interface BackendConnection {
  bind(store: Store): StoreBackend;
  /** When the store cannot be opened after all. */
  discard(): void;
}
