/**
 * Room to finish on a full disk (docs/store.md, "A full disk"). Keeping a
 * cut capture's prefix takes a few small writes more (pin, manifest, pack,
 * session record), so a directory store holds `<root>/reserve` of random
 * (incompressible) bytes and deletes it at a capture's first ENOSPC. From
 * then every capture's next write fails too, so the freed space finishes
 * calls instead of feeding whichever capture writes first; the reserve is
 * made again only once the cut captures have published and the disk has
 * room for twice it. Made by the first capture that needs a file, so a store
 * of small outputs never holds one.
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

  /** Awaited before a capture file when the store is full (success ends that state), else in the background. Never throws. */
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

  /** Marks the store full, counts the capture as cut until {@link endCut}, deletes the reserve once. */
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
