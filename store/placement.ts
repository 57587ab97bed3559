/**
 * The writing side of a store: temporary files, placing a blob or a line
 * index at its address, refreshing a deduplicated blob, and the background
 * writeback slots. BlobWriter and the line-index writer use it; users of
 * `sluice/store` never see it (it is not exported there): a store's public
 * face is open, write, read, pin, verify and close.
 */
import { randomBytes } from 'node:crypto';
import { constants, type Stats, stat } from 'node:fs';
import { dirname } from 'node:path';
import { toSluiceError } from '../engine/protocol/errors.js';
import { blobBackendOf } from './backend.js';
import { DirSync } from './dir-sync.js';
import type { StoreFile } from './file.js';
import { refreshIntact } from './integrity.js';
import type { StoreIO } from './io.js';
import type { StoreLayout } from './layout.js';
import type { Store } from './store.js';

/** Background flushes of long captures a store runs at once (libuv has 4 threads in an ES module host). */
export const MAX_BACKGROUND_WRITEBACKS = 2;

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
  private readonly tmpPrefix = `${process.pid}-${randomBytes(6).toString('hex')}`;
  private tmpCounter = 0;
  private writebacks = 0;
  private readonly dirSync: DirSync;

  /** The writing side of `store`; `assertOpen` throws ECLOSED once the store is closed. */
  constructor(store: Store, assertOpen: () => void, createdDirs: readonly string[]) {
    this.store = store;
    this.layout = store.layout;
    this.io = store.io;
    this.assertOpen = assertOpen;
    this.dirSync = new DirSync(store.io);
    for (const d of createdDirs) this.knownDirs.add(d);
  }

  /** Closes the directory descriptors kept for fsync. */
  close(): void {
    this.dirSync.close();
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
    const path = `${this.layout.tmp}/${this.tmpPrefix}${(this.tmpCounter++).toString(36)}.${kind}`;
    try {
      return { handle: await this.io.open(path, CREATE_FLAGS, 0o600), path };
    } catch (err) {
      throw toSluiceError(err, 'EDISK');
    }
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
