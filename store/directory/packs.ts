/**
 * The packs of a directory store as its publishers see them: the pack this
 * store appends small blobs to (store/pack-writer.ts, group-committed), the
 * map of where packed blobs are (store/pack-index.ts), and the dedup check
 * against a packed copy. An S3 store has none (StoreBackend.packs).
 */
import type { BlobHandle } from '../blob-handle.js';
import type { DirSync } from '../dir-sync.js';
import { type VerifiedBlob, verifyOpened } from '../integrity.js';
import { PackIndex, type PackLocation } from '../pack-index.js';
import { PackWriter } from '../pack-writer.js';
import type { Store } from '../store.js';
import { openPacked, otherCopies } from './read.js';

/**
 * By default, blobs of at most this many bytes are appended to a pack instead of
 * becoming files of their own (docs/benchmarks.md, "Packs"). Below the line
 * index's 1 MiB, so a packed blob never has one.
 */
export const DEFAULT_PACK_MAX_BLOB_BYTES = 64 * 1024;

/** Copies remembered for the dedup short cut (see {@link DirectoryPacks.ownActiveCopy}). */
const MAX_OWN_COPIES = 8192;

/** See the module comment. One per open directory store. */
export class DirectoryPacks {
  /** Where this store's packed blobs are. */
  readonly index: PackIndex;
  /** This store's own pack, appended with group commit. */
  readonly writer: PackWriter;
  /** Blobs of at most this many bytes are packed (0: none). */
  readonly maxBlobBytes: number;
  private readonly store: Store;
  /**
   * Copies this store appended, newest last, by digest: the pack and the
   * verified key, for {@link refresh}'s short cut. Bounded like the
   * verified-blob cache (the oldest are forgotten and simply checked).
   */
  private readonly ownCopies = new Map<string, { path: string | undefined; key: string }>();

  /** The packs of `store`; `dirSync` makes a new pack's name durable. */
  constructor(store: Store, dirSync: DirSync, maxBlobBytes: number) {
    this.store = store;
    this.maxBlobBytes = maxBlobBytes;
    this.index = new PackIndex(store);
    this.writer = new PackWriter(
      store.io,
      store.layout.packs,
      (dir) => dirSync.sync(dir),
      (path, entry) => this.index.add(path, entry, true),
      () => store.flushInMemoryPins(),
    );
  }

  /**
   * Publishes a small blob by appending it to this store's pack: resolves
   * once the batch it went out in is durable (one fdatasync shared by every
   * publish in the batch). The caller has checked that no intact copy exists
   * ({@link refresh}) and pinned the digest.
   */
  async append(digest: string, content: Uint8Array, lines: number): Promise<void> {
    this.store.assertOpen();
    const { entry, fileId, path } = await this.writer.append(digest, content);
    // Hashed while written: a later dedup or read of this copy need not hash it again.
    const key = `pack:${fileId}:${entry.offset}:${entry.length}`;
    this.store.verified.remember(digest, { key, lines });
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
   * (Pin.holdInOwnPack) before any seal can intervene.
   */
  ownActiveCopy(digest: string, bytes: number): boolean {
    const own = this.ownCopies.get(digest);
    if (!own || own.path === undefined || own.path !== this.writer.activePath) return false;
    const loc = this.index.known(digest);
    return (
      loc !== undefined && loc.path === own.path && loc.length === bytes && this.store.verified.holds(digest, own.key)
    );
  }

  /** True when the packs this store knows of hold a copy of `digest` (loaded on first use; not checked). */
  async knows(digest: string): Promise<boolean> {
    if (!this.index.isLoaded) await this.index.refresh().catch(() => {});
    return this.index.known(digest) !== undefined;
  }

  /**
   * True when this store knows a packed copy of `digest` that is still in
   * its pack, `bytes` long and intact. The packs present when the store was
   * opened are read on first use; packs other processes add later are not
   * looked for (a duplicate copy is harmless, a directory scan per publish
   * is not).
   */
  async refresh(digest: string, bytes: number): Promise<boolean> {
    this.store.assertOpen();
    if (this.ownActiveCopy(digest, bytes)) return true;
    if (!this.index.isLoaded) await this.index.refresh().catch(() => {});
    if (!this.index.known(digest)) return false;
    // The pack's mtime is its blobs' age: touched, so a deduplicated blob starts a new grace period (as
    // refreshBlob does for a file). Gone since (a collection moved it): the publisher appends its own copy.
    const now = new Date();
    return this.intact(digest, bytes, (path) =>
      this.store.io.utimes(path, now, now).then(
        () => true,
        () => false,
      ),
    );
  }

  /**
   * True when this store knows a committed packed copy of `digest` that is
   * still in its pack, `bytes` long and intact (hashed unless already
   * verified), and `touch` (given the pack's path) succeeds. Opening the
   * pack by its name is the check a collection's tombstoning defeats
   * (store/gc/repack.ts). A record found only by scanning may be one its
   * owner has written and not yet synced (PackLocation.committed): leaning
   * on it would make this publish return before its bytes are durable.
   */
  private async intact(digest: string, bytes: number, touch: (packPath: string) => Promise<boolean>): Promise<boolean> {
    let blob: VerifiedBlob;
    let path: string;
    try {
      const h = await openPacked(this.store, this.index, digest);
      if (!h) return false;
      if (h.packed?.committed !== true) {
        await h.close();
        return false;
      }
      path = h.packed.path;
      blob = await verifyOpened(this.store, digest, h);
    } catch {
      return false;
    }
    try {
      return blob.bytes === bytes && (await touch(path));
    } catch {
      return false;
    } finally {
      await blob.close();
    }
  }

  /** Opens `digest` from the packs this store knows of; undefined when none holds it. */
  open(digest: string): Promise<BlobHandle | undefined> {
    return openPacked(this.store, this.index, digest);
  }

  /** Every copy of `digest` but the packed one at `except`, for a reader whose copy failed its hash. */
  otherCopies(digest: string, except: PackLocation): AsyncGenerator<BlobHandle> {
    return otherCopies(this.store, digest, except);
  }
}
