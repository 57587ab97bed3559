/**
 * The local writing side of every store: tmp/ files, background writeback
 * slots, and the full-disk state; placing where the backend keeps blobs is
 * the backend's (store/backend.ts).
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
  // Unique without a random draw per file, and of the owner pattern GC reads (store/owners.ts).
  private readonly tmpPrefix = ownedName();
  private tmpCounter = 0;
  private writebacks = 0;

  /** The writing side of `store`, whose directories `createdDirs` exist already. */
  constructor(store: Store, createdDirs: readonly string[]) {
    this.store = store;
    for (const d of createdDirs) this.knownDirs.add(d);
  }

  /** False when all are taken: unbounded, long captures could hold all of libuv's 4 threads in fdatasync. */
  beginWriteback(): boolean {
    if (this.writebacks >= MAX_BACKGROUND_WRITEBACKS || !this.store.backend.placesLocally) return false;
    this.writebacks++;
    return true;
  }

  /** Frees a slot taken with {@link beginWriteback}. */
  endWriteback(): void {
    this.writebacks--;
  }

  /** Named after this process, so cleanup can tell live owners from dead. */
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

  /** While the store is full (store/space-reserve.ts), the ENOSPC a capture's write fails with. */
  fullError(): Error | undefined {
    const reserve = this.store.backend.reserve;
    return reserve?.isFull ? reserve.fullError() : undefined;
  }

  /** Frees the reserve; true when the capture is counted as cut and must call {@link cutDone}. */
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
