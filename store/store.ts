/**
 * The store: content-addressed blobs, their line indexes, pins that protect
 * published objects until their references are durable, and the tmp/ area
 * where every write starts. Blobs and indexes live in its directory, or, for
 * an S3 store, in a bucket (store/backend.ts, store/s3/), with the directory
 * (local to this host) keeping everything else.
 */
import { promises as fsp } from 'node:fs';
import { BadOptionError, ClosedError, toSluiceError, UnsupportedPlatformError } from '../engine/protocol/errors.js';
import { attachBlobBackend, type BlobBackend, blobBackendOf } from './backend.js';
import { openPacked } from './blob-handle.js';
import { type BlobInfo, BlobWriter } from './blob-writer.js';
import { makeDirs, realIO, type StoreIO } from './io.js';
import { StoreLayout } from './layout.js';
import { INDEX_MIN_BLOB_BYTES } from './line-index.js';
import {
  describeLocation,
  parseStoreLocation,
  resolveStoreLocation,
  type S3Location,
  type StoreLocation,
} from './location.js';
import type { Manifest } from './manifest.js';
import { loadManifest } from './manifest-load.js';
import type { PackIndex } from './pack-index.js';
import type { ReadPage, ReadPageBytes, ReadPageOptions } from './pages.js';
import { type Pin, PinJournal } from './pins.js';
import { DEFAULT_PACK_MAX_BLOB_BYTES, Placement } from './placement.js';
import type { S3Blobs } from './s3/blobs.js';
import type { LeaseOptions, LeaseTiming } from './s3/lease.js';
import type { VerifyOptions, VerifyReport } from './verify.js';

export { DEFAULT_STORE_DIR } from './location.js';
export type { Pin } from './pins.js';

/** Options of {@link Store.open}. */
export interface StoreOptions {
  /** Filesystem calls to use; tests inject faults here. @default realIO */
  io?: StoreIO;
  /**
   * Blobs of at most this many bytes are appended to a pack (no file per
   * blob, one fdatasync per batch of publishes); 0 gives every blob a file
   * of its own. At most 1 MiB - 1 (a packed blob never needs a line index).
   * An S3 store packs nothing (one object per blob).
   * @default `$SLUICE_PACK_MAX_BLOB_BYTES`, else 65536
   */
  packMaxBlobBytes?: number;
  /**
   * For an `s3://` location: the local directory of this host's
   * temporaries and caches. @default `$SLUICE_STORE_LOCAL`, else a per-user
   * cache directory keyed by endpoint, bucket and prefix (store/location.ts)
   */
  localDir?: string;
  /**
   * For an `s3://` location: S3Client configuration applied over the
   * standard chain (credentials, region, endpoint from the AWS variables).
   */
  s3ClientConfig?: Record<string, unknown>;
  /**
   * For an `s3://` location: how long its pins (a lease object) protect
   * their digests after the lease's last write, and how often it is
   * rewritten (store/s3/lease.ts). @default `$SLUICE_S3_LEASE_TTL_MS` and
   * `$SLUICE_S3_LEASE_RENEW_MS`, else 120000 and a quarter of the TTL
   */
  lease?: LeaseOptions;
  /**
   * For an `s3://` location: the bound in bytes of the local read cache of
   * blobs (store/s3/read-cache.ts); 0 turns it off.
   * @default `$SLUICE_S3_CACHE_BYTES`, else 1 GiB
   */
  s3CacheBytes?: number;
}

/** Where {@link StoreOptions.packMaxBlobBytes} comes from when it is not given. */
function defaultPackMax(env: NodeJS.ProcessEnv = process.env): number {
  const v = env.SLUICE_PACK_MAX_BLOB_BYTES;
  if (v === undefined || v === '') return DEFAULT_PACK_MAX_BLOB_BYTES;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n >= INDEX_MIN_BLOB_BYTES) {
    throw new BadOptionError(
      `SLUICE_PACK_MAX_BLOB_BYTES must be an integer from 0 to ${INDEX_MIN_BLOB_BYTES - 1}, got ${JSON.stringify(v)}`,
    );
  }
  return n;
}

export { MAX_BACKGROUND_WRITEBACKS } from './placement.js';

/** The writing side of each open store (store/placement.ts), kept off its public face. */
const placements = new WeakMap<Store, Placement>();

/**
 * The writing side of `store`: for BlobWriter and the line-index writer
 * only; not part of `sluice/store`.
 */
export function placementOf(store: Store): Placement {
  return placements.get(store) as Placement;
}

/**
 * The read path (pages, and through it line indexes and text cuts): loaded on
 * the first read, since an engine's main thread publishes and records but
 * reads pages only for `Engine.read`, and every module a cold open loads is
 * on the path to its first call. Verify and an S3 store's lease load on first
 * use the same way.
 */
const pagesModule = () => import('./pages.js');

/** Where `store` knows its packed blobs to be (store/pack-index.ts): for the read seam, GC and verify. */
export function packIndexOf(store: Store): PackIndex {
  return placementOf(store).packs;
}

/**
 * Resolves the store directory the way the CLI does: an explicit value, else
 * `$SLUICE_STORE`, else `./.sluice`. An empty value counts as unset (it would
 * otherwise resolve to the working directory itself). An `s3://` value has
 * no directory of its own: for it this throws EUNSUPPORTED (use
 * {@link resolveStoreLocation}), and a malformed one EBADOPTION; it is
 * never taken for a relative path.
 */
export function resolveStoreDir(explicit?: string, env: NodeJS.ProcessEnv = process.env): string {
  const location = resolveStoreLocation(explicit, env);
  if (location.kind === 'directory') return location.dir;
  throw new UnsupportedPlatformError(`${location.url} is an S3 store, not a directory`, { store: location.url });
}

/** A content-addressed artifact store rooted at one directory. */
export class Store {
  /** Paths inside the store. */
  readonly layout: StoreLayout;
  /** Filesystem calls (replaceable for fault injection). */
  readonly io: StoreIO;
  /** Where the store is: its directory, or its bucket and prefix with the local directory. */
  readonly location: StoreLocation;
  /** The local pin journal, or for an S3 store its lease (store/s3/lease.ts). */
  private pins: Pick<PinJournal, 'pin' | 'close' | 'flushInMemory'>;
  private closed = false;

  private constructor(location: StoreLocation, io: StoreIO) {
    this.location = location;
    this.layout = new StoreLayout(location.kind === 'directory' ? location.dir : location.localDir);
    this.io = io;
    this.pins = new PinJournal(this.layout.pins, io);
  }

  /**
   * Opens (creating when needed) the store at `location`: a directory, or
   * `s3://bucket/prefix` (EBADOPTION when malformed; EMISSINGDEP without
   * the AWS SDK; ENOTFOUND when the bucket does not exist). Opening never
   * reads blobs, so corrupt content cannot prevent it.
   */
  static async open(location: string | StoreLocation, options: StoreOptions = {}): Promise<Store> {
    const where = typeof location === 'string' ? parseStoreLocation(location, process.env, options.localDir) : location;
    // An S3 store keeps one object per blob (docs/store.md, "S3 stores"): packs are a detail of the directory store.
    const packMax = where.kind === 's3' ? 0 : (options.packMaxBlobBytes ?? defaultPackMax());
    if (!Number.isInteger(packMax) || packMax < 0 || packMax >= INDEX_MIN_BLOB_BYTES) {
      throw new BadOptionError(
        `packMaxBlobBytes must be an integer from 0 to ${INDEX_MIN_BLOB_BYTES - 1}, got ${JSON.stringify(options.packMaxBlobBytes)}`,
      );
    }
    // Checked before anything is opened or created. The lease's module loads only for an S3 store.
    const timing = where.kind === 's3' ? (await import('./s3/lease.js')).leaseTiming(options.lease) : undefined;
    const store = new Store(where, options.io ?? realIO);
    const l = store.layout;
    // The bucket first: a wrong location creates nothing locally.
    const backend = where.kind === 's3' ? await openS3Backend(where, store, options) : undefined;
    const dirs = [l.blobs, l.index, l.packs, l.tmp, l.pins, l.sessions];
    for (const d of dirs) {
      try {
        await makeDirs(d);
      } catch (err) {
        backend?.close();
        // Not a directory, not writable, disk full: a typed EDISK naming the OS code, like every store write.
        throw toSluiceError(err, 'EDISK');
      }
    }
    if (backend) {
      attachBlobBackend(store, backend);
      store.pins = backend.leaseJournal(timing as LeaseTiming);
    }
    placements.set(store, new Placement(store, () => store.assertOpen(), dirs, packMax));
    return store;
  }

  /** The store's root directory (for an S3 store, its local directory). */
  get root(): string {
    return this.layout.root;
  }

  /**
   * What opens this store again, as `--store` takes it: the directory, or
   * the `s3://` URL (a worker thread opens the store by it for the read tool).
   */
  get locator(): string {
    return describeLocation(this.location);
  }

  /**
   * Marks the store closed (later writes fail with ECLOSED), closes its
   * directory descriptors, and closes its pin journal, removing the file when
   * nothing is held.
   */
  async close(): Promise<void> {
    this.closed = true;
    await placementOf(this).close();
    // Pins first: an S3 store's lease is deleted through the backend's client.
    await this.pins.close();
    blobBackendOf(this)?.close();
  }

  /** Starts a streaming blob write. */
  writer(): BlobWriter {
    this.assertOpen();
    return new BlobWriter(this);
  }

  /** Publishes `content` (a string is stored as UTF-8) and returns the blob; `pin` protects it before it is placed. */
  async publishBytes(content: Uint8Array | string, expectedDigest?: string, pin?: Pin): Promise<BlobInfo> {
    const w = this.writer();
    const buf = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
    try {
      if (buf.length > 0) await w.write(buf);
    } catch (err) {
      await w.abort();
      throw err;
    }
    return w.commit(expectedDigest, pin);
  }

  /**
   * Reads one page of `artifact://<digest>` or `artifact://<digest>/<stream>`
   * (zero-based line `offset`, `limit` lines, at most 2000 lines and 2 MiB).
   * See {@link readPage} for the contract and its errors.
   */
  readPage(uri: string, options?: ReadPageOptions): Promise<ReadPage> {
    return pagesModule().then((m) => m.readPage(this, uri, options));
  }

  /** Like {@link readPage}, with the page's stored bytes instead of their text (see {@link readPageBytes}). */
  readPageBytes(uri: string, options?: ReadPageOptions): Promise<ReadPageBytes> {
    return pagesModule().then((m) => m.readPageBytes(this, uri, options));
  }

  /**
   * The manifest stored as blob `digest` (integrity-checked, at most
   * MAX_MANIFEST_BYTES read). Fails with ENOTFOUND, EINTEGRITY or ENOTMANIFEST.
   */
  loadManifest(digest: string): Promise<Manifest> {
    return loadManifest(this, digest);
  }

  /**
   * Hashes every blob and lists corrupt ones and manifest references that
   * are missing. Removes nothing; with `repair`, moves corrupt blobs to
   * quarantine/ (an S3 store deletes the corrupt object) so the next publish
   * of their content restores them.
   */
  verify(options: VerifyOptions = {}): Promise<VerifyReport> {
    const backend = blobBackendOf(this);
    // An S3 store: every object hashed in ranged GETs; a repair deletes the corrupt version (store/s3/verify.ts).
    if (backend) return import('./s3/verify.js').then((m) => m.verifyS3Store(this, backend as S3Blobs, options));
    return import('./verify.js').then((m) => m.verifyStore(this, options));
  }

  /**
   * True when a blob with `digest` is present, as a file or packed (content
   * is not checked; a packed copy's record header is, so a location a
   * collection has since removed does not count).
   */
  async hasBlob(digest: string): Promise<boolean> {
    const backend = blobBackendOf(this);
    if (backend) return backend.hasBlob(digest);
    try {
      await fsp.access(this.layout.blobPath(digest));
      return true;
    } catch {
      const h = await openPacked(this, digest).catch(() => undefined);
      await h?.close();
      return h !== undefined;
    }
  }

  /** True when a blob file with `digest` is at its address (packs are not looked at). */
  async hasBlobFile(digest: string): Promise<boolean> {
    try {
      await fsp.access(this.layout.blobPath(digest));
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Pins `digests` against garbage collection. The pin is a file in pins/
   * owned by this process (its pid is in the name), one digest per line, so
   * a pin left by a dead process is recognisable and reclaimable. Publishers
   * add a digest *before* placing the blob, so a GC that sees the blob also
   * sees the pin (see docs/operations.md).
   */
  pin(digests: readonly string[] = []): Promise<Pin> {
    this.assertOpen();
    return this.pins.pin(digests);
  }

  /** @internal Writes the pins held in memory to the journal (the pack writer, before a seal; store/pins.ts). */
  flushInMemoryPins(): Promise<void> {
    return this.pins.flushInMemory();
  }

  /** @throws ClosedError (ECLOSED) once the store is closed. */
  private assertOpen(): void {
    if (this.closed) throw new ClosedError('the store is closed');
  }
}

/** Connects the S3 backend of `store` (the SDK is loaded only here). */
async function openS3Backend(
  where: S3Location,
  store: Store,
  options: StoreOptions,
): Promise<BlobBackend & { leaseJournal(timing: LeaseTiming): Pick<PinJournal, 'pin' | 'close' | 'flushInMemory'> }> {
  const { S3Blobs } = await import('./s3/blobs.js');
  const connect = {
    ...(options.s3ClientConfig ? { clientConfig: options.s3ClientConfig } : {}),
    ...(options.s3CacheBytes !== undefined ? { cacheBytes: options.s3CacheBytes } : {}),
  };
  return S3Blobs.open(where, store.layout, store.io, connect);
}
