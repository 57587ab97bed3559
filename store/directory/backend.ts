/**
 * The backend of a store kept in a local directory (store/backend.ts):
 * blob files renamed into `blobs/` in the durable order, small blobs in
 * packs, pins in `pins/`, the space reserve, and the collector and audit of
 * store/gc/ and store/verify.ts (loaded on first use).
 */
import { promises as fsp, type Stats, stat } from 'node:fs';
import { dirname } from 'node:path';
import type { StoreBackend } from '../backend.js';
import type { BlobHandle } from '../blob-handle.js';
import { DirSync } from '../dir-sync.js';
import { READ_STORE_FILE, type StoreFile } from '../file.js';
import type { CollectHooks, GcOptions, GcReport } from '../gc/collect.js';
import { refreshIntact } from '../integrity.js';
import { PinJournal } from '../pins.js';
import { SpaceReserve } from '../space-reserve.js';
import type { Store } from '../store.js';
import type { VerifyOptions, VerifyReport } from '../verify.js';
import { DirectoryPacks } from './packs.js';
import { openBlobFile, openDirectoryBlob } from './read.js';
import { directoryTotals } from './totals.js';

/** See the module comment. */
export class DirectoryBackend implements StoreBackend {
  readonly pins: PinJournal;
  readonly placesLocally = true;
  readonly totalsBy = 'walk';
  readonly packs: DirectoryPacks;
  readonly objectPacks = undefined;
  readonly reserve: SpaceReserve;
  readonly bucket = undefined;
  private readonly store: Store;
  private readonly dirSync: DirSync;

  /** The backend of the directory store `store`, packing blobs of at most `packMaxBlobBytes`. */
  constructor(store: Store, packMaxBlobBytes: number) {
    this.store = store;
    this.pins = new PinJournal(store.layout.pins, store.io);
    this.dirSync = new DirSync(store.io);
    this.packs = new DirectoryPacks(store, this.dirSync, packMaxBlobBytes);
    this.reserve = new SpaceReserve(store.io, store.layout.reserve);
  }

  openBlob(digest: string): Promise<BlobHandle> {
    return openDirectoryBlob(this.store, this.packs.index, digest);
  }

  openBlobFile(digest: string): Promise<BlobHandle> {
    return openBlobFile(this.store, digest);
  }

  async openIndex(digest: string): Promise<StoreFile | undefined> {
    try {
      return await this.store.io.open(this.store.layout.indexPath(digest), READ_STORE_FILE);
    } catch {
      // Missing or unreadable: both mean "no usable index".
      return undefined;
    }
  }

  /** A blob file counts, and so does a packed copy whose record header still names it. */
  async hasBlob(digest: string): Promise<boolean> {
    try {
      await fsp.access(this.store.layout.blobPath(digest));
      return true;
    } catch {
      const h = await this.packs.open(digest).catch(() => undefined);
      await h?.close();
      return h !== undefined;
    }
  }

  async dropCached(): Promise<boolean> {
    return false;
  }

  /** Nothing to wait for: a collection on this store takes its tombstones from under a publisher's pin. */
  async settle(): Promise<void> {}

  async refreshBlob(digest: string, bytes: number): Promise<boolean> {
    this.store.assertOpen();
    const target = this.store.layout.blobPath(digest);
    const existing = await statOrUndefined(target);
    if (!existing?.isFile() || existing.size !== bytes) return false;
    const now = new Date();
    return refreshIntact(this.store, digest, bytes, () =>
      this.store.io.utimes(target, now, now).then(
        () => true,
        (err: { code?: unknown }) => {
          // Removed (by GC) since the stat: the caller publishes its own copy instead of failing.
          if (err?.code === 'ENOENT') return false;
          throw err;
        },
      ),
    );
  }

  /** Renames the fsynced temporary file to the blob's address, then fsyncs the directory. */
  async placeBlob(tmpPath: string, digest: string): Promise<undefined> {
    const target = this.store.layout.blobPath(digest);
    await this.store.placement.moveIntoPlace(tmpPath, target);
    await this.dirSync.sync(dirname(target));
    return undefined;
  }

  placeIndex(tmpPath: string, digest: string): Promise<void> {
    return this.store.placement.moveIntoPlace(tmpPath, this.store.layout.indexPath(digest));
  }

  totals(): Promise<{ blobs: number; bytes: number }> {
    return directoryTotals(this.store, this.packs.index);
  }

  async collect(hooks: CollectHooks, options?: GcOptions): Promise<GcReport> {
    const { collectStore } = await import('../gc/collect.js');
    return collectStore(this.store, this.packs, hooks, options);
  }

  async verify(options?: VerifyOptions): Promise<VerifyReport> {
    const { verifyStore } = await import('../verify.js');
    return verifyStore(this.store, options);
  }

  /** Seals and closes this store's pack, closes the directory descriptors kept for fsync, then the pin journal. */
  async close(): Promise<void> {
    await this.reserve.close();
    await this.packs.writer.close();
    this.dirSync.close();
    await this.pins.close();
  }
}

/** stat(2) through the callback API (cheaper for the main thread than fs/promises), undefined on any error. */
function statOrUndefined(path: string): Promise<Stats | undefined> {
  return new Promise((resolve) => stat(path, (err, st) => resolve(err ? undefined : st)));
}
