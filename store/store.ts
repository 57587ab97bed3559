/**
 * The store: content-addressed blobs, their line indexes, pins that protect
 * published objects until their references are durable, and the tmp/ area
 * where every write starts. Blobs and indexes live where its backend keeps
 * them (store/backend.ts): its directory, or an S3 bucket, with the
 * directory (local to this host) keeping everything else.
 */
import { promises as fsp } from 'node:fs';
import { BadOptionError, ClosedError, toSluiceError, UnsupportedPlatformError } from '../engine/protocol/errors.js';
import type { BackendConnection, StoreBackend } from './backend.js';
import { type BlobInfo, BlobWriter } from './blob-writer.js';
import { DirectoryBackend } from './directory/backend.js';
import { DEFAULT_PACK_MAX_BLOB_BYTES } from './directory/packs.js';
import { makeDirs, realIO, type StoreIO } from './io.js';
import { StoreLayout } from './layout.js';
import { INDEX_MIN_BLOB_BYTES } from './line-index.js';
import { describeLocation, parseStoreLocation, resolveStoreLocation, type StoreLocation } from './location.js';
import type { Manifest } from './manifest.js';
import { loadManifest } from './manifest-load.js';
import type { ReadPage, ReadPageBytes, ReadPageOptions } from './pages.js';
import type { Pin } from './pins.js';
import { Placement } from './placement.js';
import type { LeaseOptions } from './s3/lease.js';
import { VerifiedBlobs } from './verified.js';
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

/**
 * The read path (pages, and through it line indexes and text cuts): loaded on
 * the first read, since an engine's main thread publishes and records but
 * reads pages only for `Engine.read`, and every module a cold open loads is
 * on the path to its first call. A backend's collector and audit load on
 * first use the same way.
 */
const pagesModule = () => import('./pages.js');

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
  /** Where blobs and indexes are kept, with what depends on where (store/backend.ts). */
  readonly backend: StoreBackend;
  /** @internal The local writing side: temporary files, writeback slots (store/placement.ts). */
  readonly placement: Placement;
  /** @internal What this store has hashed and found intact (store/integrity.ts). */
  readonly verified = new VerifiedBlobs();
  private closed = false;

  private constructor(
    location: StoreLocation,
    layout: StoreLayout,
    io: StoreIO,
    createdDirs: readonly string[],
    connection: BackendConnection,
  ) {
    this.location = location;
    this.layout = layout;
    this.io = io;
    this.placement = new Placement(this, createdDirs);
    this.backend = connection.bind(this);
  }

  /**
   * Opens (creating when needed) the store at `location`: a directory, or
   * `s3://bucket/prefix` (EBADOPTION when malformed; EMISSINGDEP without
   * the AWS SDK; ENOTFOUND when the bucket does not exist). Opening never
   * reads blobs, so corrupt content cannot prevent it.
   */
  static async open(location: string | StoreLocation, options: StoreOptions = {}): Promise<Store> {
    const where = typeof location === 'string' ? parseStoreLocation(location, process.env, options.localDir) : location;
    const io = options.io ?? realIO;
    const layout = new StoreLayout(where.kind === 'directory' ? where.dir : where.localDir);
    // The bucket first: a wrong location creates nothing locally. The S3 backend's modules load only here.
    const connection =
      where.kind === 's3'
        ? await (await import('./s3/backend.js')).connectS3(where, options)
        : directoryConnection(packMaxOf(options));
    const dirs = [layout.blobs, layout.index, layout.packs, layout.tmp, layout.pins, layout.sessions];
    for (const d of dirs) {
      try {
        await makeDirs(d);
      } catch (err) {
        connection.discard();
        // Not a directory, not writable, disk full: a typed EDISK naming the OS code, like every store write.
        throw toSluiceError(err, 'EDISK');
      }
    }
    return new Store(where, layout, io, dirs, connection);
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
    await this.backend.close();
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
    return this.backend.verify(options);
  }

  /**
   * True when a blob with `digest` is present, as a file, packed or as an
   * object (content is not checked; a packed copy's record header is, so a
   * location a collection has since removed does not count).
   */
  hasBlob(digest: string): Promise<boolean> {
    return this.backend.hasBlob(digest);
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
   * a pin left by a dead process is recognisable and reclaimable (an S3
   * store's pins are its lease object, store/s3/lease.ts). Publishers
   * add a digest *before* placing the blob, so a GC that sees the blob also
   * sees the pin (see docs/operations.md).
   */
  pin(digests: readonly string[] = []): Promise<Pin> {
    this.assertOpen();
    return this.backend.pins.pin(digests);
  }

  /** @internal Writes the pins held in memory to the journal (the pack writer, before a seal; store/pins.ts). */
  flushInMemoryPins(): Promise<void> {
    return this.backend.pins.flushInMemory();
  }

  /** @internal @throws ClosedError (ECLOSED) once the store is closed: every write checks it first. */
  assertOpen(): void {
    if (this.closed) throw new ClosedError('the store is closed');
  }
}

/** The packing threshold `options` ask for. @throws BadOptionError (EBADOPTION) out of range. */
function packMaxOf(options: StoreOptions): number {
  const packMax = options.packMaxBlobBytes ?? defaultPackMax();
  if (!Number.isInteger(packMax) || packMax < 0 || packMax >= INDEX_MIN_BLOB_BYTES) {
    throw new BadOptionError(
      `packMaxBlobBytes must be an integer from 0 to ${INDEX_MIN_BLOB_BYTES - 1}, got ${JSON.stringify(options.packMaxBlobBytes)}`,
    );
  }
  return packMax;
}

/** A directory store's backend, which needs nothing before its store exists. */
function directoryConnection(packMaxBlobBytes: number): BackendConnection {
  return { bind: (store) => new DirectoryBackend(store, packMaxBlobBytes), discard: () => {} };
}
