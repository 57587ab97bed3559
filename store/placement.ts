/**
 * The writing side of a store: temporary files, placing a blob or a line
 * index at its address, refreshing a deduplicated blob, and the background
 * writeback slots. BlobWriter and the line-index writer use it; users of
 * `sluice/store` never see it (it is not exported there): a store's public
 * face is open, write, read, pin, verify and close.
 */
import { constants, type Stats, stat } from 'node:fs';
import { dirname } from 'node:path';
import { toSluiceError } from '../engine/protocol/errors.js';
import { blobBackendOf } from './backend.js';
import { DirSync } from './dir-sync.js';
import type { StoreFile } from './file.js';
import { packedIntact, refreshIntact, rememberPacked, remembersPacked } from './integrity.js';
import type { StoreIO } from './io.js';
import type { StoreLayout } from './layout.js';
import { ownedName } from './owners.js';
import { PackIndex } from './pack-index.js';
import { PackWriter } from './pack-writer.js';
import { SpaceReserve } from './space-reserve.js';
import type { Store } from './store.js';

/**
 * By default, blobs of at most this many bytes are appended to a pack instead of
 * becoming files of their own (chosen by measurement: docs/benchmarks.md,
 * "Packs"). Below the line index's 1 MiB, so a packed blob never has one.
 */
export const DEFAULT_PACK_MAX_BLOB_BYTES = 64 * 1024;

/** Background flushes of long captures a store runs at once (libuv has 4 threads in an ES module host). */
export const MAX_BACKGROUND_WRITEBACKS = 2;

/** Copies remembered for the dedup short cut (see Placement.ownCopies). */
const MAX_OWN_COPIES = 8192;

const CREATE_FLAGS = constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY;

/** See the module comment. One per open store. */
export class Placement {
  private readonly store: Store;
  private readonly layout: StoreLayout;
  private readonly io: StoreIO;
  private readonly assertOpen: () => void;
  private readonly knownDirs = new Set<string>();
  /**
   * Temporary names are `<pid>-<12 hex of this store><counter>.<kind>`: unique
   * without a random draw per file (the owner pattern GC reads is unchanged).
   */
  private readonly tmpPrefix = ownedName();
  private tmpCounter = 0;
  private writebacks = 0;
  private readonly dirSync: DirSync;
  /** Where this store's packed blobs are. */
  readonly packs: PackIndex;
  /** This store's own pack, appended with group commit. */
  readonly packWriter: PackWriter;
  /** Room to finish calls when the disk fills (a directory store's). */
  private readonly reserve: SpaceReserve;

  /** Blobs of at most this many bytes are packed (0: none). */
  readonly packMaxBlobBytes: number;
  /**
   * Copies this store appended, newest last, by digest: the pack and the
   * verified key, for {@link refreshPacked}'s short cut. Bounded like the
   * verified-blob cache (the oldest are forgotten and simply checked).
   */
  private readonly ownCopies = new Map<string, { path: string | undefined; key: string }>();

  /** The writing side of `store`; `assertOpen` throws ECLOSED once the store is closed. */
  constructor(store: Store, assertOpen: () => void, createdDirs: readonly string[], packMaxBlobBytes: number) {
    this.packMaxBlobBytes = packMaxBlobBytes;
    this.store = store;
    this.layout = store.layout;
    this.io = store.io;
    this.assertOpen = assertOpen;
    this.dirSync = new DirSync(store.io);
    for (const d of createdDirs) this.knownDirs.add(d);
    this.packs = new PackIndex(store);
    this.reserve = new SpaceReserve(store.io, this.layout.reserve);
    this.packWriter = new PackWriter(
      store.io,
      this.layout.packs,
      (dir) => this.dirSync.sync(dir),
      (path, entry) => this.packs.add(path, entry, true),
      () => store.flushInMemoryPins(),
    );
  }

  /** Seals and closes this store's pack, then closes the directory descriptors kept for fsync. */
  async close(): Promise<void> {
    await this.reserve.close();
    await this.packWriter.close();
    this.dirSync.close();
  }

  /**
   * Publishes a small blob by appending it to this store's pack: resolves
   * once the batch it went out in is durable (one fdatasync shared by every
   * publish in the batch). The caller has checked that no intact copy exists
   * ({@link refreshPacked}, {@link refreshBlob}) and pinned the digest.
   */
  async appendPacked(digest: string, content: Uint8Array, lines: number): Promise<void> {
    this.assertOpen();
    const { entry, fileId, path } = await this.packWriter.append(digest, content);
    // Hashed while written: a later dedup or read of this copy need not hash it again.
    const key = `pack:${fileId}:${entry.offset}:${entry.length}`;
    rememberPacked(this.store, digest, key, lines);
    this.ownCopies.delete(digest);
    this.ownCopies.set(digest, { path, key });
    if (this.ownCopies.size > MAX_OWN_COPIES) this.ownCopies.delete(this.ownCopies.keys().next().value as string);
  }

  /**
   * True, with no I/O, when this store itself appended `digest` (`bytes`
   * long) to the pack it still appends to, and the batch is committed. Such
   * a copy needs no check: that pack is removed by no collection while
   * unsealed and its owner lives (a collection in this process seals it
   * first, which changes the active pack), a committed record never changes,
   * and the copy was hashed as it was written (the same trust as the
   * verified-file cache, integrity.ts). Nor its age: the seal that ends the
   * pack's life as the active one is written later, and that write is the
   * pack's new mtime. Synchronous, so a caller may take an in-memory pin
   * ({@link Pin.holdInOwnPack}) before any seal can intervene.
   */
  ownActiveCopy(digest: string, bytes: number): boolean {
    const own = this.ownCopies.get(digest);
    if (!own || own.path === undefined || own.path !== this.packWriter.activePath) return false;
    const loc = this.packs.known(digest);
    return (
      loc !== undefined && loc.path === own.path && loc.length === bytes && remembersPacked(this.store, digest, own.key)
    );
  }

  /** True when the packs this store knows of hold a copy of `digest` (loaded on first use; not checked). */
  async knowsPacked(digest: string): Promise<boolean> {
    if (!this.packs.isLoaded) await this.packs.refresh().catch(() => {});
    return this.packs.known(digest) !== undefined;
  }

  /**
   * True when this store knows a packed copy of `digest` that is still in
   * its pack, `bytes` long and intact. The packs present when the store was
   * opened are read on first use; packs other processes add later are not
   * looked for (a duplicate copy is harmless, a directory scan per publish
   * is not).
   */
  async refreshPacked(digest: string, bytes: number): Promise<boolean> {
    this.assertOpen();
    if (this.ownActiveCopy(digest, bytes)) return true;
    if (!this.packs.isLoaded) await this.packs.refresh().catch(() => {});
    if (!this.packs.known(digest)) return false;
    // The pack's mtime is its blobs' age: touched, so a deduplicated blob starts a new grace period (as
    // refreshBlob does for a file). Gone since (a collection moved it): the publisher appends its own copy.
    const now = new Date();
    return packedIntact(this.store, digest, bytes, (path) =>
      this.io.utimes(path, now, now).then(
        () => true,
        () => false,
      ),
    );
  }

  /**
   * Reserves one of the store's {@link MAX_BACKGROUND_WRITEBACKS} slots for a
   * capture's background flush; false when they are all taken (the capture
   * tries again after its next write). Without a bound, 16 long captures could
   * hold all of libuv's 4 threads in fdatasync while every write waited.
   */
  beginWriteback(): boolean {
    if (this.writebacks >= MAX_BACKGROUND_WRITEBACKS || !this.placesLocally) return false;
    this.writebacks++;
    return true;
  }

  /**
   * False for an S3 store: its temporaries are uploaded, never renamed into
   * place, so they need no fsync (the object is durable when the PUT
   * returns) and get no background writeback.
   */
  get placesLocally(): boolean {
    return blobBackendOf(this.store) === undefined;
  }

  /** Frees a slot taken with {@link beginWriteback}. */
  endWriteback(): void {
    this.writebacks--;
  }

  /**
   * Creates a new temporary file in tmp/, named after this process so cleanup
   * can tell live owners from dead ones.
   */
  async createTemp(kind: string): Promise<{ handle: StoreFile; path: string }> {
    this.assertOpen();
    if (kind === 'blob' && this.placesLocally) {
      // A capture file: the reserve goes first (store/space-reserve.ts); on a full store it must
      // be made again before captures write, so that one is awaited.
      if (this.reserve.isFull) await this.reserve.ensure();
      else void this.reserve.ensure();
    }
    const path = this.tempPath(kind);
    try {
      return { handle: await this.io.open(path, CREATE_FLAGS, 0o600), path };
    } catch (err) {
      throw toSluiceError(err, 'EDISK');
    }
  }

  private tempPath(kind: string): string {
    return `${this.layout.tmp}/${this.tmpPrefix}${(this.tmpCounter++).toString(36)}.${kind}`;
  }

  /**
   * True once a capture of this store hit ENOSPC, until there is room for
   * the reserve again: captures then fail their next write with
   * {@link fullError}, keeping what they wrote (store/space-reserve.ts).
   */
  get isFull(): boolean {
    return this.reserve.isFull;
  }

  /** The ENOSPC a capture's write fails with while the store {@link isFull}. */
  fullError(): Error {
    return this.reserve.fullError();
  }

  /**
   * At a capture's ENOSPC, or its write failing because the store is full:
   * frees the reserve for the writes that finish the calls in flight. True
   * when the capture is counted as cut: it must call {@link cutDone} once it
   * has published or been discarded.
   */
  async diskFull(): Promise<boolean> {
    if (!this.placesLocally) return false;
    await this.reserve.release();
    return true;
  }

  /** A capture counted by {@link diskFull} has published or been discarded. */
  cutDone(): void {
    this.reserve.endCut();
  }

  /**
   * Moves a fully written and fsynced temporary file to its content address
   * (rename, then fsync of the directory). The caller has checked with
   * {@link refreshBlob} that no good copy is there; a same-named blob of the
   * wrong size is corrupt and is replaced. In an S3 store the file is
   * uploaded instead (store/backend.ts); the handle returned then stands for
   * the placed object.
   */
  async placeBlob(tmpPath: string, digest: string): Promise<StoreFile | undefined> {
    const backend = blobBackendOf(this.store);
    if (backend) return backend.placeBlob(tmpPath, digest);
    const dir = dirname(this.layout.blobPath(digest));
    await this.ensureDir(dir);
    await this.io.rename(tmpPath, this.layout.blobPath(digest));
    await this.dirSync.sync(dir);
    return undefined;
  }

  /**
   * True when blob `digest` is present, `bytes` long and intact (its content
   * hashed, unless this store verified this very file already); its mtime
   * is then refreshed, so a concurrent GC sees it as fresh. A same-named
   * file of another size, or corrupt, does not count: the caller places its
   * own copy over it, so publishing the same content again heals it.
   */
  async refreshBlob(digest: string, bytes: number): Promise<boolean> {
    this.assertOpen();
    // An S3 object is immutable once created: the same intact-content check, and nothing to refresh.
    if (blobBackendOf(this.store)) return refreshIntact(this.store, digest, bytes, async () => true);
    const target = this.layout.blobPath(digest);
    const existing = await statOrUndefined(target);
    if (!existing?.isFile() || existing.size !== bytes) return false;
    const now = new Date();
    return refreshIntact(this.store, digest, bytes, () =>
      this.io.utimes(target, now, now).then(
        () => true,
        (err: { code?: unknown }) => {
          // Removed (by GC) since the stat: the caller publishes its own copy instead of failing.
          if (err?.code === 'ENOENT') return false;
          throw err;
        },
      ),
    );
  }

  /**
   * A publisher's step after pinning `digest` and before deduplicating or
   * placing it: on an S3 store, waits while a collection elsewhere may still
   * delete that blob (store/s3/tombstones.ts). Nothing to do in a directory store.
   */
  async settle(digest: string): Promise<void> {
    await blobBackendOf(this.store)?.settle(digest);
  }

  /**
   * Moves a finished line-index file beside its blob. No fsync: the index is a
   * cache that is validated on use and rebuilt when missing.
   */
  async placeIndex(tmpPath: string, digest: string): Promise<void> {
    // An S3 store uploads it first; the file then stays here as this host's copy.
    await blobBackendOf(this.store)?.placeIndex(tmpPath, digest);
    const target = this.layout.indexPath(digest);
    await this.ensureDir(dirname(target));
    await this.io.rename(tmpPath, target);
  }

  private async ensureDir(dir: string): Promise<void> {
    if (this.knownDirs.has(dir)) return;
    await this.io.mkdir(dir);
    this.knownDirs.add(dir);
  }
}

/** stat(2) through the callback API (cheaper for the main thread than fs/promises), undefined on any error. */
function statOrUndefined(path: string): Promise<Stats | undefined> {
  return new Promise((resolve) => stat(path, (err, st) => resolve(err ? undefined : st)));
}
