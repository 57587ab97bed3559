/**
 * fsync of a directory after a rename into it, with the directory kept open.
 *
 * Every publication renames a blob into one of 256 shard directories and must
 * then fsync that directory. Opening and closing it each time triples the
 * thread-pool round trips of that step, and on a small machine each round trip
 * costs the main thread far more than the syscall (docs/benchmarks.md,
 * "Per-call overhead"). So a store keeps the descriptors of the shard
 * directories it published into open while it is open: at most 256, one per
 * shard. Both the open and the fsync go
 * through the store's {@link StoreIO} (`open`, then `fsync` of the directory's
 * descriptor), so fault injection reaches this path like any other.
 *
 * A cached descriptor names the directory that existed when it was opened.
 * The store never removes a blob shard directory, and a rename into a
 * directory that has been removed fails (ENOENT) before its fsync is reached.
 */
import { constants } from 'node:fs';
import type { StoreFile } from './file.js';
import type { StoreIO } from './io.js';

interface OpenDir {
  file: Promise<StoreFile>;
  /** fsyncs in flight: a descriptor is never closed under one. */
  users: number;
}

/** Directory fsyncs of one store. */
export class DirSync {
  private readonly io: StoreIO;
  private readonly dirs = new Map<string, OpenDir>();
  private closed = false;

  constructor(io: StoreIO) {
    this.io = io;
  }

  /** Flushes `dir`'s entries to stable storage (`dir` is a blob shard directory). */
  async sync(dir: string): Promise<void> {
    if (this.closed) return this.io.fsyncDir(dir);
    let entry = this.dirs.get(dir);
    if (entry === undefined) {
      entry = { file: this.io.open(dir, constants.O_RDONLY | constants.O_DIRECTORY), users: 0 };
      this.dirs.set(dir, entry);
    }
    entry.users++;
    try {
      await this.io.fsync(await entry.file);
    } catch (err) {
      // A failed open or fsync is not cached: the next publication tries afresh.
      if (this.dirs.get(dir) === entry) this.dirs.delete(dir);
      throw err;
    } finally {
      entry.users--;
      if (entry.users === 0 && (this.closed || this.dirs.get(dir) !== entry)) release(entry);
    }
  }

  /** Closes every idle descriptor; ones in use close when their fsync ends. */
  close(): void {
    this.closed = true;
    for (const entry of this.dirs.values()) if (entry.users === 0) release(entry);
    this.dirs.clear();
  }
}

function release(entry: OpenDir): void {
  entry.file.then(
    (f) => f.close().catch(() => {}),
    () => {},
  );
}
