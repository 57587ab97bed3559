/**
 * The store-wide GC lock: `gc/lock`, holding the owner's token
 * (`<pid>-t<start ticks>b<boot id>r<random>`, store/owners.ts). One
 * collection at a time; publishers never take it (pins and tombstoning keep
 * them safe, see collect.ts). The lock is written whole in tmp/ and linked
 * into place (link fails when the name exists), so it is never seen empty
 * or half-written, and its holder is judged by the token alone: alive
 * exactly when that pid runs with that start tick in this boot, whatever
 * the clocks say. A lock whose owner is dead is broken: renamed aside,
 * checked to be the very file judged stale (same inode), and removed.
 *
 * Locks written by older versions hold a bare pid, and one written where
 * /proc could not be read holds `<pid>-<random>` (no token); theirs is the
 * old rule (the pid lives and did not start after the lock was written),
 * and one with no valid pid is taken as abandoned after
 * {@link UNWRITTEN_STALE_MS}.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { join } from 'node:path';
import { TimeoutError, toSluiceError } from '../../engine/protocol/errors.js';
import type { StoreIO } from '../io.js';
import { OwnerCheck, ownedName, ownerToken } from '../owners.js';
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
  const token = ownedName();
  for (;;) {
    try {
      // Nothing that can fail comes between the link and the return: a failure there would leave a
      // lock naming this live process, which every later collection waits for until it exits.
      const ino = await linkWhole(store, path, `${token}\n`);
      let released = false;
      return {
        release: async () => {
          if (released) return;
          released = true;
          // Only our own lock: never remove one a breaker replaced it with. One that cannot be
          // stat'ed is removed all the same: kept, it would stop every collection while we live.
          const st = await io
            .stat(path)
            .catch((err: unknown) => ((err as { code?: unknown }).code === 'ENOENT' ? null : undefined));
          if (st === undefined || st?.ino === ino) await io.unlink(path).catch(() => {});
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

/**
 * Creates `path` holding `text`, or fails with EEXIST: written and closed in
 * tmp/ under an owned name first (reclaimed by GC if this process dies
 * there), then hard-linked into place, so no reader ever sees it partial.
 * Resolves to the lock's inode, taken before the link (a link shares it).
 */
async function linkWhole(store: Store, path: string, text: string): Promise<number> {
  const io = store.io;
  const tmp = join(store.layout.tmp, `${ownedName()}.lock`);
  const fh = await io.open(tmp, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600);
  try {
    let ino: number;
    try {
      const line = Buffer.from(text);
      for (let off = 0; off < line.length; ) off += await io.write(fh, line, off, line.length - off, off);
      ino = (await fh.stat()).ino;
    } finally {
      await fh.close();
    }
    await io.link(tmp, path);
    return ino;
  } finally {
    await io.unlink(tmp).catch(() => {});
  }
}

async function readHolder(
  io: StoreIO,
  path: string,
): Promise<{ pid: number; token: string | undefined; mtimeMs: number; ino: number } | undefined> {
  try {
    // Without blocking: a FIFO in the lock's place is no holder (and is never broken: it is not stale).
    const fh = await io.open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
    try {
      const st = await fh.stat();
      if (!st.isFile()) return undefined;
      const text = (await fh.readFile()).toString('utf8').trim();
      // A token (`<pid>-t…`); an owned name without one (`<pid>-<random>`, where /proc could not be
      // read), judged by the pid as an older version's bare pid is; or that bare pid.
      const token = ownerToken(text) ? text : undefined;
      const m = /^([1-9][0-9]{0,9})(?:-[0-9a-zA-Z]+)?$/.exec(text);
      const pid = m ? Number(m[1]) : Number.NaN;
      return { pid, token, mtimeMs: st.mtimeMs, ino: st.ino };
    } finally {
      await fh.close();
    }
  } catch {
    return undefined;
  }
}

/**
 * An older version's lock without a valid pid was being written, unless it
 * has been so for longer than this (a lock of this version is never
 * partial, so this rule only ends such a lock left by a crash).
 */
const UNWRITTEN_STALE_MS = 10_000;

function isStale(holder: { pid: number; token: string | undefined; mtimeMs: number }): boolean {
  if (!Number.isInteger(holder.pid) || holder.pid <= 0) return Date.now() - holder.mtimeMs > UNWRITTEN_STALE_MS;
  return !new OwnerCheck().alive(holder.pid, holder.mtimeMs, holder.token);
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
