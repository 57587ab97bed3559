/** The store: content-addressed blobs and line indexes in its backend, pins, and the local tmp/. */
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
   * Blobs of at most this many bytes (< 1 MiB, so no line index) go to a pack (a pack object on S3); 0: none.
   * @default `$SLUICE_PACK_MAX_BLOB_BYTES`, else 65536
   */
  packMaxBlobBytes?: number;
  /**
   * For `s3://`: this host's temporaries and caches.
   * @default `$SLUICE_STORE_LOCAL`, else a per-user cache directory (store/location.ts)
   */
  localDir?: string;
  /** For `s3://`: S3Client configuration over the standard AWS chain. */
  s3ClientConfig?: Record<string, unknown>;
  /**
   * For `s3://`: the lease's TTL and renewal (store/s3/lease.ts).
   * @default `$SLUICE_S3_LEASE_TTL_MS` and `$SLUICE_S3_LEASE_RENEW_MS`, else 120000 and a quarter of the TTL
   */
  lease?: LeaseOptions;
  /**
   * For `s3://`: bytes of the local read cache; 0 turns it off.
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

// Loaded on the first read: every module a cold open loads delays its first call.
const pagesModule = () => import('./pages.js');

/** The CLI's store directory: `explicit`, else `$SLUICE_STORE`, else `./.sluice`; EUNSUPPORTED for `s3://`. */
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
   * Opens (creating) the store at a directory or `s3://bucket/prefix`; never reads blobs.
   * @throws EBADOPTION; EMISSINGDEP without the AWS SDK; ENOTFOUND for a missing bucket.
   */
  static async open(location: string | StoreLocation, options: StoreOptions = {}): Promise<Store> {
    const where = typeof location === 'string' ? parseStoreLocation(location, process.env, options.localDir) : location;
    const io = options.io ?? realIO;
    const layout = new StoreLayout(where.kind === 'directory' ? where.dir : where.localDir);
    // The bucket first: a wrong location creates nothing locally.
    const connection =
      where.kind === 's3'
        ? await (await import('./s3/backend.js')).connectS3(where, options, packMaxOf(options))
        : directoryConnection(packMaxOf(options));
    const dirs = [layout.blobs, layout.index, layout.packs, layout.tmp, layout.pins, layout.sessions];
    for (const d of dirs) {
      try {
        await makeDirs(d);
      } catch (err) {
        connection.discard();
        // A typed EDISK naming the OS code, like every store write.
        throw toSluiceError(err, 'EDISK');
      }
    }
    return new Store(where, layout, io, dirs, connection);
  }

  /** The store's root directory (for an S3 store, its local directory). */
  get root(): string {
    return this.layout.root;
  }

  /** What opens this store again, as `--store` takes it (a worker opens it by this). */
  get locator(): string {
    return describeLocation(this.location);
  }

  /** Later writes fail with ECLOSED; the pin journal is removed when nothing is held. */
  async close(): Promise<void> {
    this.closed = true;
    await this.backend.close();
  }

  /** Starts a streaming blob write. */
  writer(): BlobWriter {
    this.assertOpen();
    return new BlobWriter(this);
  }

  /**
   * Publishes `content` (a string is stored as UTF-8) and returns the blob; `pin` protects it before it is
   * placed. `deferred`: see {@link BlobWriter.commit}.
   */
  async publishBytes(
    content: Uint8Array | string,
    expectedDigest?: string,
    pin?: Pin,
    deferred = false,
  ): Promise<BlobInfo> {
    const w = this.writer();
    const buf = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
    try {
      if (buf.length > 0) await w.write(buf);
    } catch (err) {
      await w.abort();
      throw err;
    }
    return w.commit(expectedDigest, pin, deferred);
  }

  /** One page of `artifact://<digest>[/<stream>]`; see {@link readPage}. */
  readPage(uri: string, options?: ReadPageOptions): Promise<ReadPage> {
    return pagesModule().then((m) => m.readPage(this, uri, options));
  }

  /** Like {@link readPage}, with the page's stored bytes instead of their text (see {@link readPageBytes}). */
  readPageBytes(uri: string, options?: ReadPageOptions): Promise<ReadPageBytes> {
    return pagesModule().then((m) => m.readPageBytes(this, uri, options));
  }

  /** The manifest stored as blob `digest`; ENOTFOUND, EINTEGRITY or ENOTMANIFEST. */
  loadManifest(digest: string): Promise<Manifest> {
    return loadManifest(this, digest);
  }

  /** Hashes every blob, listing corrupt ones and missing references; `repair` quarantines corrupt blobs. */
  verify(options: VerifyOptions = {}): Promise<VerifyReport> {
    return this.backend.verify(options);
  }

  /** A file, packed or an object; content not checked, but a packed copy's record header is. */
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

  /** Pins `digests` against collection (docs/operations.md); publishers pin *before* placing. */
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
