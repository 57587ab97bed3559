/**
 * Where a store keeps its blobs and line indexes, and everything that
 * depends on where: opening and placing them, the publisher's dedup check,
 * pins, counting, collecting and auditing. Two implementations: a local
 * directory (store/directory/backend.ts) and an S3 bucket
 * (store/s3/backend.ts, loaded only for an `s3://` store). A {@link Store}
 * holds one from Store.open on; the rest of the store (pages, search,
 * manifests, the integrity check, the writer) calls these methods and never
 * asks which kind it has. What only one kind has is a capability that is
 * undefined on the other ({@link StoreBackend.packs}, {@link StoreBackend.reserve},
 * {@link StoreBackend.bucket}).
 *
 * tmp/, pins/ (of a directory store), sessions/ and the capture itself stay
 * in the local directory for both (store/placement.ts).
 */
import type { BlobHandle } from './blob-handle.js';
import type { DirectoryPacks } from './directory/packs.js';
import type { StoreFile } from './file.js';
import type { CollectHooks, GcOptions, GcReport } from './gc/collect.js';
import type { PinJournal } from './pins.js';
import type { S3Objects } from './s3/objects.js';
import type { SpaceReserve } from './space-reserve.js';
import type { Store } from './store.js';
import type { VerifyOptions, VerifyReport } from './verify.js';

/** A store's pins: the local pin journal (store/pins.ts), or an S3 store's lease (store/s3/lease.ts). */
export type PinStore = Pick<PinJournal, 'pin' | 'close' | 'flushInMemory'>;

/** The bucket of an S3 store, for what keeps objects of its own beside the blobs (session records). */
export interface S3Bucket {
  /** The object layer; its `requests` count what the store cost. */
  readonly objects: S3Objects;
  /** What every key of this store starts with: `''`, or the prefix and `/`. */
  readonly keyBase: string;
}

/** The blobs and indexes of one store (see the module comment). */
export interface StoreBackend {
  /** The store's pins, which a collection of this backend reads. */
  readonly pins: PinStore;
  /**
   * False when placing a blob uploads it: its temporary file then needs no
   * fsync (the object is durable when the upload returns) and gets no
   * background writeback.
   */
  readonly placesLocally: boolean;
  /** How {@link totals} counts: a walk of local files, or a listing paid per request. */
  readonly totalsBy: 'walk' | 'listing';
  /** The packs of small blobs (a directory store's; an S3 store packs nothing). */
  readonly packs: DirectoryPacks | undefined;
  /** The room kept to finish calls when the disk fills (a directory store's: store/space-reserve.ts). */
  readonly reserve: SpaceReserve | undefined;
  /** The bucket (an S3 store's). */
  readonly bucket: S3Bucket | undefined;

  /**
   * Opens any copy of blob `digest` for reading (not yet verified).
   *
   * @throws NotFoundError (ENOTFOUND) when no copy exists; IntegrityError (EINTEGRITY) for a symbolic link at its address; DiskError (EDISK).
   */
  openBlob(digest: string): Promise<BlobHandle>;
  /**
   * Opens the blob's own file or object, never a packed copy: what a
   * deduplicating publisher and an audit of that copy check.
   */
  openBlobFile(digest: string): Promise<BlobHandle>;
  /** Opens the line index of blob `digest`, or undefined when there is none (it is only a cache). */
  openIndex(digest: string): Promise<StoreFile | undefined>;
  /** True when blob `digest` is present (content not checked). */
  hasBlob(digest: string): Promise<boolean>;
  /**
   * Removes a local copy of blob `digest` that {@link openBlob} may have
   * served (an S3 store's read cache) after it failed its integrity check;
   * true when there was one, so the caller opens the blob again.
   */
  dropCached(digest: string): Promise<boolean>;

  /**
   * A publisher's step after pinning `digest` and before deduplicating onto
   * or placing it: waits while a collection elsewhere may still delete it.
   */
  settle(digest: string): Promise<void>;
  /**
   * True when blob `digest` is present, `bytes` long and intact (hashed
   * unless this store verified that very copy), its age refreshed so a
   * concurrent collection sees it as fresh. Anything else is false: the
   * caller then places its own copy, which heals a corrupt one.
   */
  refreshBlob(digest: string, bytes: number): Promise<boolean>;
  /**
   * Publishes the finished temporary file `tmpPath` as blob `digest`; the
   * caller found no intact copy, so whatever is there is replaced. Returns a
   * handle whose identity is the placed copy's, for the integrity cache, or
   * undefined when the caller's own descriptor of the file has it.
   */
  placeBlob(tmpPath: string, digest: string): Promise<StoreFile | undefined>;
  /** Publishes the line-index file `tmpPath` of blob `digest` (no fsync: it is a cache, checked on use). */
  placeIndex(tmpPath: string, digest: string): Promise<void>;

  /** Blobs held and their bytes, for the store's gauges. */
  totals(): Promise<{ blobs: number; bytes: number }>;
  /**
   * Collects the garbage: blobs not reachable from `hooks.roots`, the pins
   * or the grace period (docs/operations.md, "Garbage collection").
   *
   * @throws BadOptionError (EBADOPTION); TimeoutError (ETIMEOUT) when another collection holds the lock; DiskError (EDISK).
   */
  collect(hooks: CollectHooks, options?: GcOptions): Promise<GcReport>;
  /** Hashes every blob and reports what is corrupt or missing (see {@link Store.verify}). */
  verify(options?: VerifyOptions): Promise<VerifyReport>;
  /** Closes the pins and releases descriptors and connections. */
  close(): Promise<void>;
}

/** A backend made ready by Store.open before its store exists (an S3 store's connected bucket). */
export interface BackendConnection {
  /** The backend of `store`, which it holds from then on. */
  bind(store: Store): StoreBackend;
  /** Releases what connecting took, when the store cannot be opened after all. */
  discard(): void;
}
