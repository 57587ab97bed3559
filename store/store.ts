/**
 * The directory store: content-addressed blobs, their line indexes, pins that
 * protect published objects until their references are durable, and the tmp/
 * area where every write starts.
 */
import { promises as fsp } from 'node:fs';
import { resolve } from 'node:path';
import { BadOptionError, ClosedError, toSluiceError } from '../engine/protocol/errors.js';
import { openPacked } from './blob-handle.js';
import { type BlobInfo, BlobWriter } from './blob-writer.js';
import { makeDirs, realIO, type StoreIO } from './io.js';
import { StoreLayout } from './layout.js';
import { INDEX_MIN_BLOB_BYTES } from './line-index.js';
import type { Manifest } from './manifest.js';
import { loadManifest } from './manifest-load.js';
import type { PackIndex } from './pack-index.js';
import { type ReadPage, type ReadPageBytes, type ReadPageOptions, readPage, readPageBytes } from './pages.js';
import { type Pin, PinJournal } from './pins.js';
import { DEFAULT_PACK_MAX_BLOB_BYTES, Placement } from './placement.js';
import { type VerifyOptions, type VerifyReport, verifyStore } from './verify.js';

/** The default store directory, relative to the working directory. */
export const DEFAULT_STORE_DIR = '.sluice';

export type { Pin } from './pins.js';

/** Options of {@link Store.open}. */
export interface StoreOptions {
  /** Filesystem calls to use; tests inject faults here. @default realIO */
  io?: StoreIO;
  /**
   * Blobs of at most this many bytes are appended to a pack (no file per
   * blob, one fdatasync per batch of publishes); 0 gives every blob a file
   * of its own. At most 1 MiB - 1 (a packed blob never needs a line index).
   * @default `$SLUICE_PACK_MAX_BLOB_BYTES`, else 65536
   */
  packMaxBlobBytes?: number;
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

/** Where `store` knows its packed blobs to be (store/pack-index.ts): for the read seam, GC and verify. */
export function packIndexOf(store: Store): PackIndex {
  return placementOf(store).packs;
}

/**
 * Resolves the store directory the way the CLI does: an explicit value, else
 * `$SLUICE_STORE`, else `./.sluice`. An empty value counts as unset (it would
 * otherwise resolve to the working directory itself).
 */
export function resolveStoreDir(explicit?: string, env: NodeJS.ProcessEnv = process.env): string {
  return resolve(explicit || env.SLUICE_STORE || DEFAULT_STORE_DIR);
}

/** A content-addressed artifact store rooted at one directory. */
export class Store {
  /** Paths inside the store. */
  readonly layout: StoreLayout;
  /** Filesystem calls (replaceable for fault injection). */
  readonly io: StoreIO;
  private readonly pins: PinJournal;
  private closed = false;

  private constructor(root: string, io: StoreIO) {
    this.layout = new StoreLayout(root);
    this.io = io;
    this.pins = new PinJournal(this.layout.pins, io);
  }

  /** Opens (creating when needed) the store at `dir`. Opening never reads blobs, so corrupt content cannot prevent it. */
  static async open(dir: string, options: StoreOptions = {}): Promise<Store> {
    const packMax = options.packMaxBlobBytes ?? defaultPackMax();
    if (!Number.isInteger(packMax) || packMax < 0 || packMax >= INDEX_MIN_BLOB_BYTES) {
      throw new BadOptionError(
        `packMaxBlobBytes must be an integer from 0 to ${INDEX_MIN_BLOB_BYTES - 1}, got ${JSON.stringify(options.packMaxBlobBytes)}`,
      );
    }
    const store = new Store(resolve(dir), options.io ?? realIO);
    const l = store.layout;
    const dirs = [l.blobs, l.index, l.packs, l.tmp, l.pins, l.sessions];
    for (const d of dirs) {
      try {
        await makeDirs(d);
      } catch (err) {
        // Not a directory, not writable, disk full: a typed EDISK naming the OS code, like every store write.
        throw toSluiceError(err, 'EDISK');
      }
    }
    placements.set(store, new Placement(store, () => store.assertOpen(), dirs, packMax));
    return store;
  }

  /** The store's root directory. */
  get root(): string {
    return this.layout.root;
  }

  /**
   * Marks the store closed (later writes fail with ECLOSED), closes its
   * directory descriptors, and closes its pin journal, removing the file when
   * nothing is held.
   */
  async close(): Promise<void> {
    this.closed = true;
    await placementOf(this).close();
    await this.pins.close();
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
    return readPage(this, uri, options);
  }

  /** Like {@link readPage}, with the page's stored bytes instead of their text (see {@link readPageBytes}). */
  readPageBytes(uri: string, options?: ReadPageOptions): Promise<ReadPageBytes> {
    return readPageBytes(this, uri, options);
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
   * quarantine/ so the next publish of their content restores them.
   */
  verify(options: VerifyOptions = {}): Promise<VerifyReport> {
    return verifyStore(this, options);
  }

  /**
   * True when a blob with `digest` is present, as a file or packed (content
   * is not checked; a packed copy's record header is, so a location a
   * collection has since removed does not count).
   */
  async hasBlob(digest: string): Promise<boolean> {
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

  /** @throws ClosedError (ECLOSED) once the store is closed. */
  private assertOpen(): void {
    if (this.closed) throw new ClosedError('the store is closed');
  }
}
