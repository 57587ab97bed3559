/**
 * The local writing side every store has, whatever its backend: temporary
 * files in tmp/, moving a finished file to its local path, the background
 * writeback slots, and the full-disk state (a backend's reserve).
 * BlobWriter and the line-index writer use it; placing a blob or an index
 * where the backend keeps it is the backend's (store/backend.ts).
 */
import { constants } from 'node:fs';
import { dirname } from 'node:path';
import { toSluiceError } from '../engine/protocol/errors.js';
import type { StoreFile } from './file.js';
import { ownedName } from './owners.js';
import type { Store } from './store.js';

/** Background flushes of long captures a store runs at once (libuv has 4 threads in an ES module host). */
export const MAX_BACKGROUND_WRITEBACKS = 2;

const CREATE_FLAGS = constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY;

/** See the module comment. One per open store. */
export class Placement {
  private readonly store: Store;
  private readonly knownDirs = new Set<string>();
  /**
   * Temporary names are `<pid>-<12 hex of this store><counter>.<kind>`: unique
   * without a random draw per file, of the owner pattern GC reads (store/owners.ts).
   */
  private readonly tmpPrefix = ownedName();
  private tmpCounter = 0;
  private writebacks = 0;

  /** The writing side of `store`, whose directories `createdDirs` exist already. */
  constructor(store: Store, createdDirs: readonly string[]) {
    this.store = store;
    for (const d of createdDirs) this.knownDirs.add(d);
  }

  /**
   * Reserves one of the store's {@link MAX_BACKGROUND_WRITEBACKS} slots for a
   * capture's background flush; false when they are all taken (the capture
   * tries again after its next write). Without a bound, 16 long captures could
   * hold all of libuv's 4 threads in fdatasync while every write waited.
   */
  beginWriteback(): boolean {
    if (this.writebacks >= MAX_BACKGROUND_WRITEBACKS || !this.store.backend.placesLocally) return false;
    this.writebacks++;
    return true;
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
    this.store.assertOpen();
    const reserve = this.store.backend.reserve;
    if (kind === 'blob' && reserve) {
      // A capture file: the reserve goes first (store/space-reserve.ts); on a full store it must
      // be made again before captures write, so that one is awaited.
      if (reserve.isFull) await reserve.ensure();
      else void reserve.ensure();
    }
    const path = `${this.store.layout.tmp}/${this.tmpPrefix}${(this.tmpCounter++).toString(36)}.${kind}`;
    try {
      return { handle: await this.store.io.open(path, CREATE_FLAGS, 0o600), path };
    } catch (err) {
      throw toSluiceError(err, 'EDISK');
    }
  }

  /**
   * The ENOSPC a capture's write fails with while the store is full (a
   * capture of it hit ENOSPC, and there is no room for the reserve again
   * yet: store/space-reserve.ts), else undefined.
   */
  fullError(): Error | undefined {
    const reserve = this.store.backend.reserve;
    return reserve?.isFull ? reserve.fullError() : undefined;
  }

  /**
   * At a capture's ENOSPC, or its write failing because the store is full:
   * frees the reserve for the writes that finish the calls in flight. True
   * when the capture is counted as cut: it must call {@link cutDone} once it
   * has published or been discarded.
   */
  async diskFull(): Promise<boolean> {
    const reserve = this.store.backend.reserve;
    if (!reserve) return false;
    await reserve.release();
    return true;
  }

  /** A capture counted by {@link diskFull} has published or been discarded. */
  cutDone(): void {
    this.store.backend.reserve?.endCut();
  }

  /** Renames `tmpPath` to `target` in the local directory, creating its shard directory when needed (no fsync). */
  async moveIntoPlace(tmpPath: string, target: string): Promise<void> {
    const dir = dirname(target);
    if (!this.knownDirs.has(dir)) {
      await this.store.io.mkdir(dir);
      this.knownDirs.add(dir);
    }
    await this.store.io.rename(tmpPath, target);
  }
}
