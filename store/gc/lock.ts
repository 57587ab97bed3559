/**
 * The store-wide GC lock: `gc/lock`, created with O_EXCL, holding the owner's
 * pid. One collection at a time; publishers never take it (pins and
 * tombstoning keep them safe, see collect.ts). A lock whose owner is dead (see
 * owners.ts) is broken: renamed aside, checked to be the very file judged
 * stale (same inode), and removed.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { join } from 'node:path';
import { TimeoutError, toSluiceError } from '../../engine/protocol/errors.js';
import type { StoreIO } from '../io.js';
import { OwnerCheck } from '../owners.js';
import type { Store } from '../store.js';

/** A held GC lock. */
export interface GcLock {
  release(): Promise<void>;
}

const POLL_MS = 50;

/** Path of the GC lock file of `store`. */
export function gcLockPath(store: Store): string {
  return join(store.layout.gc, 'lock');
}

/**
 * Takes the GC lock of `store`, waiting up to `timeoutMs` for a live holder.
 *
 * @throws TimeoutError (ETIMEOUT) when a live collection holds it longer.
 */
export async function acquireGcLock(store: Store, timeoutMs: number): Promise<GcLock> {
  const path = gcLockPath(store);
  const deadline = Date.now() + timeoutMs;
  const io = store.io;
  await io.mkdir(store.layout.gc).catch((err) => {
    throw toSluiceError(err, 'EDISK');
  });
  for (;;) {
    try {
      const fh = await io.open(path, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600);
      try {
        const line = Buffer.from(`${process.pid}\n`);
        for (let off = 0; off < line.length; ) off += await io.write(fh, line, off, line.length - off, off);
      } finally {
        await fh.close();
      }
      const { ino } = await io.stat(path);
      let released = false;
      return {
        release: async () => {
          if (released) return;
          released = true;
          // Only our own lock: never remove one a breaker replaced it with.
          const st = await io.stat(path).catch(() => undefined);
          if (st?.ino === ino) await io.unlink(path).catch(() => {});
        },
      };
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'EEXIST') throw toSluiceError(err, 'EDISK');
    }
    const holder = await readHolder(io, path);
    if (holder && isStale(holder)) {
      await breakLock(io, path, holder.ino);
      continue;
    }
    if (Date.now() >= deadline) {
      throw new TimeoutError(
        `another garbage collection (pid ${holder?.pid || 'unknown'}) holds ${path}; try again when it has finished`,
        { pid: holder?.pid || null },
      );
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

async function readHolder(
  io: StoreIO,
  path: string,
): Promise<{ pid: number; mtimeMs: number; ino: number } | undefined> {
  try {
    // Without blocking: a FIFO in the lock's place is no holder (and is never broken: it is not stale).
    const fh = await io.open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
    try {
      const st = await fh.stat();
      if (!st.isFile()) return undefined;
      return { pid: Number((await fh.readFile()).toString('utf8').trim()), mtimeMs: st.mtimeMs, ino: st.ino };
    } finally {
      await fh.close();
    }
  } catch {
    return undefined;
  }
}

/** A lock without a valid pid is being written, unless it has been so for longer than this. */
const UNWRITTEN_STALE_MS = 10_000;

function isStale(holder: { pid: number; mtimeMs: number }): boolean {
  if (!Number.isInteger(holder.pid) || holder.pid <= 0) return Date.now() - holder.mtimeMs > UNWRITTEN_STALE_MS;
  return !new OwnerCheck().alive(holder.pid, holder.mtimeMs);
}

async function breakLock(io: StoreIO, path: string, staleIno: number): Promise<void> {
  const aside = `${path}.stale-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    await io.rename(path, aside);
  } catch {
    return; // Someone else broke it first.
  }
  const st = await io.stat(aside).catch(() => undefined);
  if (st && st.ino !== staleIno) {
    // We moved a fresh lock taken after our check: put it back if the name is still free.
    await io.link(aside, path).catch(() => {});
  }
  await io.unlink(aside).catch(() => {});
}
