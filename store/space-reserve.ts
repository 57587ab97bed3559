/**
 * Room to finish on a full disk. When a capture's write fails with ENOSPC,
 * the bytes already in its capture file are kept (BlobWriter.commitWritten),
 * but keeping them takes a few small writes more: the pin journal, a
 * manifest, small streams appended to the pack, the session's event record.
 * On a disk with no space at all those would fail too and the call would
 * keep nothing. So a directory store holds `<root>/reserve`, a file of
 * {@link RESERVE_BYTES} written in full (allocated, not sparse), and deletes
 * it at the first ENOSPC of a capture: what it held is what those writes
 * use.
 *
 * From that moment the store is full for its captures: every capture's next
 * write fails with ENOSPC too (and keeps its prefix), so the freed space goes
 * to finishing calls rather than to whichever capture writes first. The
 * reserve is made again before the next capture file is created; once that
 * succeeds there is space again and captures write as before.
 *
 * The reserve is made by the first capture that needs a file of its own
 * (output above the pack threshold), not when a store opens: a store whose
 * outputs are all small never holds one. Several processes on one store
 * share the one file: making it writes zeros over whatever part exists,
 * deleting it is idempotent.
 */
import { constants } from 'node:fs';
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
   * Makes the reserve unless it is in place. Before a capture creates its
   * file: awaited when the store is full (the latch clears only if it
   * succeeds), else started in the background. Never throws.
   */
  async ensure(): Promise<void> {
    if (this.held) return;
    this.making ??= this.make().finally(() => {
      this.making = undefined;
    });
    await this.making;
  }

  private async make(): Promise<void> {
    await this.releasing;
    try {
      const st = await this.io.stat(this.path).catch(() => undefined);
      if (!(st?.isFile() && st.size >= RESERVE_BYTES)) {
        // Zeros over zeros: a concurrent maker, or the rest of one that crashed part-way, writes the
        // same bytes, so no temporary name is needed. Written, not a sparse ftruncate: the blocks must
        // be allocated to be freed later.
        const fh = await this.io.open(this.path, MAKE_FLAGS, 0o600);
        try {
          await writeAll(this.io, fh, Buffer.alloc(RESERVE_BYTES), 0);
        } finally {
          await fh.close();
        }
      }
      this.held = true;
      this.full = false;
    } catch {
      // No room (or no permission) for a reserve: a later capture tries again.
    }
  }

  /** At a capture's ENOSPC: marks the store full and deletes the reserve (once; it may already be gone). */
  release(): Promise<void> {
    this.full = true;
    this.held = false;
    this.releasing ??= this.io
      .unlink(this.path)
      .catch(() => {})
      .finally(() => {
        this.releasing = undefined;
      });
    return this.releasing;
  }
}
