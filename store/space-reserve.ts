/**
 * Room to finish on a full disk. When a capture's write fails with ENOSPC,
 * the bytes already in its capture file are kept (BlobWriter.commitWritten),
 * but keeping them takes a few small writes more: the pin journal, a
 * manifest, small streams appended to the pack, the session's event record.
 * On a disk with no space at all those would fail too and the call would
 * keep nothing. So a directory store holds `<root>/reserve`, a file of
 * {@link RESERVE_BYTES} of random bytes (allocated, and not compressible
 * away by a filesystem that compresses), and deletes it at the first
 * ENOSPC of a capture: what it held is what those writes use.
 *
 * From that moment the store is full for its captures: every capture's next
 * write fails too (and keeps its prefix), so the freed space goes to
 * finishing calls rather than to whichever capture writes first. Captures
 * cut this way are counted until they have published; only then, and only
 * when the filesystem has room for twice the reserve, is it made again
 * before the next capture file is created, and that ends the full state.
 *
 * The reserve is made by the first capture that needs a file of its own
 * (output above the pack threshold), not when a store opens: a store whose
 * outputs are all small never holds one. Several processes on one store
 * share the one file, but each knows only what it did: one that finds it
 * already deleted by another frees nothing at its own ENOSPC, and its cut
 * captures keep what the remaining space allows.
 */
import { randomBytes } from 'node:crypto';
import { constants, promises as fsp } from 'node:fs';
import { dirname } from 'node:path';
import { DiskError } from '../engine/protocol/errors.js';
import type { StoreIO } from './io.js';
import { writeAll } from './io.js';

/** Size of the reserve: room for the pin, manifest, pack and event-log writes that finish the calls in flight. */
export const RESERVE_BYTES = 1024 * 1024;

/** Created or reopened, never through a symbolic link. */
const MAKE_FLAGS = constants.O_CREAT | constants.O_WRONLY | constants.O_NOFOLLOW;

/** The reserve of one open directory store. */
export class SpaceReserve {
  private readonly io: StoreIO;
  private readonly path: string;
  /** Set by the first ENOSPC, cleared when the reserve could be made again. */
  private full = false;
  /** The reserve is known to be in place (made or found by this store). */
  private held = false;
  /** Bumped by every release: a make that started before one does not count. */
  private generation = 0;
  /** Captures cut by a full disk that have not published yet: the freed space is theirs. */
  private cuts = 0;
  private making: Promise<void> | undefined;
  private releasing: Promise<void> | undefined;

  /** `path` is `<root>/reserve`. */
  constructor(io: StoreIO, path: string) {
    this.io = io;
    this.path = path;
  }

  /** True after a capture hit ENOSPC, until the reserve could be made again. */
  get isFull(): boolean {
    return this.full;
  }

  /** The error a capture's write fails with while the store is full. */
  fullError(): DiskError {
    return new DiskError('ENOSPC: no space left on device, write (the store is full)', {
      errno: 'ENOSPC',
      syscall: 'write',
    });
  }

  /**
   * Makes the reserve unless it is in place, or while cut captures are still
   * publishing. Before a capture creates its file: awaited when the store is
   * full (the full state ends only if it succeeds), else started in the
   * background. Never throws.
   */
  async ensure(): Promise<void> {
    if (this.held || this.cuts > 0) return;
    // A make in flight may have begun before a release (then it ends nothing): one more after it.
    if (this.making) await this.making;
    if (this.held || this.cuts > 0) return;
    this.making ??= this.make().finally(() => {
      this.making = undefined;
    });
    await this.making;
  }

  private async make(): Promise<void> {
    await this.releasing;
    const generation = this.generation;
    let opened = false;
    try {
      const st = await this.io.stat(this.path).catch(() => undefined);
      if (!(st?.isFile() && st.size >= RESERVE_BYTES)) {
        // Room for twice the reserve first: making it must not take the last of the space.
        if (this.full && (await freeBytes(dirname(this.path))) < 2 * RESERVE_BYTES) return;
        // Written over whatever part exists (a concurrent maker's, or one that crashed part-way): no
        // temporary name is needed. Written, not a sparse ftruncate: the blocks must be allocated.
        const fh = await this.io.open(this.path, MAKE_FLAGS, 0o600);
        opened = true;
        try {
          await writeAll(this.io, fh, randomBytes(RESERVE_BYTES), 0);
        } finally {
          await fh.close();
        }
      }
      if (generation !== this.generation) return;
      this.held = true;
      this.full = false;
    } catch {
      // No room (or no permission): a part-written reserve would only hold the last free blocks.
      if (opened) await this.io.unlink(this.path).catch(() => {});
    }
  }

  /**
   * At a capture's ENOSPC (or its write failing because the store is full):
   * marks the store full, counts the capture as cut until {@link endCut},
   * and deletes the reserve (once; it may already be gone).
   */
  release(): Promise<void> {
    this.full = true;
    this.held = false;
    this.generation++;
    this.cuts++;
    this.releasing ??= this.io
      .unlink(this.path)
      .catch(() => {})
      .finally(() => {
        this.releasing = undefined;
      });
    return this.releasing;
  }

  /** A capture counted by {@link release} has published (or given up). */
  endCut(): void {
    this.cuts--;
  }

  /** Waits for a reserve being made (a store closes after it). */
  async close(): Promise<void> {
    await this.making;
  }
}

/** Bytes an unprivileged writer may still use on the filesystem of `dir`; Infinity when it cannot be told. */
async function freeBytes(dir: string): Promise<number> {
  try {
    const st = await fsp.statfs(dir);
    return st.bavail * st.bsize;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}
