/** The packs of a directory store as its publishers see them (store/pack-writer.ts, store/pack-index.ts). */
import type { BlobHandle } from '../blob-handle.js';
import type { DirSync } from '../dir-sync.js';
import { type VerifiedBlob, verifyOpened } from '../integrity.js';
import { PackIndex, type PackLocation } from '../pack-index.js';
import { PackWriter } from '../pack-writer.js';
import type { Store } from '../store.js';
import { openPacked, otherCopies } from './read.js';

/** docs/benchmarks.md, "Packs"; under the line index's 1 MiB, so a packed blob never has one. */
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
  // For refresh's short cut; bounded like the verified-blob cache.
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

  /** Resolves once its batch is durable; the caller found no intact copy and pinned the digest. */
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
   * True, with no I/O, when this store appended `digest` to the pack it still
   * appends to and the batch is committed: no collection removes that pack
   * while unsealed and its owner lives, a committed record never changes, and
   * the copy was hashed as written. Synchronous, so the caller may hold it in
   * memory (Pin.holdInOwnPack) before any seal can intervene.
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

  /** Packs other processes add later are not looked for: a duplicate is harmless, a scan per publish is not. */
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
   * Opening the pack by name is the check a collection's tombstoning defeats
   * (store/gc/repack.ts). A record found only by scanning may not be synced
   * yet: leaning on it would return before the publish is durable.
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
