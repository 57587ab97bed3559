/**
 * The store-wide GC lock: one collection at a time. Publishers never take
 * it (pins and tombstoning keep them safe, see collect.ts).
 *
 * The lock is the directory `gc/lock` holding one file named for its owner,
 * `<pid>-t<start ticks>b<boot id>r<random>.owner` (store/owners.ts). A
 * collector prepares such a directory under an owned name in `gc/` and
 * renames it to `gc/lock`. rename(2) replaces a missing or empty directory
 * and fails on a non-empty one, and that is the whole protocol:
 *
 * - **taking**: the rename succeeds only when no owner file is in place;
 * - **breaking** a lock whose owner is dead (judged by the token alone:
 *   that pid runs with that start tick in this boot, whatever the clocks
 *   say): unlink that owner's file by its name, then rmdir `gc/lock`. The
 *   name is unique to the dead owner, so a breaker that judged it stale and
 *   was overtaken (another breaker took the lock meanwhile) removes nothing
 *   of the new holder's: its unlink finds no such file and its rmdir finds
 *   the directory not empty;
 * - **releasing**: unlink our own owner file, then rmdir; a collector that
 *   got in between our two steps makes the rmdir fail, harmlessly.
 *
 * So no interleaving of takers, breakers and releasers ever has two holders,
 * and no step rests on a timestamp. Anything else at `gc/lock` (a regular
 * file, a FIFO, a symbolic link) is nobody's lock and is never broken.
 */
import { constants } from 'node:fs';
import { join } from 'node:path';
import { TimeoutError, toSluiceError } from '../../engine/protocol/errors.js';
import type { StoreIO } from '../io.js';
import { OwnerCheck, ownedName, ownerPid } from '../owners.js';
import type { Store } from '../store.js';

/** A held GC lock. */
export interface GcLock {
  release(): Promise<void>;
}

const POLL_MS = 50;
/** A lock directory being prepared: `gc/lock.prep-<owned name>`. */
const PREP_PREFIX = 'lock.prep-';
/** The owner file inside a lock directory. */
const OWNER_SUFFIX = '.owner';

/** Path of the GC lock of `store` (a directory). */
function gcLockPath(store: Store): string {
  return join(store.layout.gc, 'lock');
}

/** What stands at `gc/lock` when the rename failed: `stale` lists the dead owners' files to break. */
type Holder = { kind: 'gone' } | { kind: 'held'; stale: string[] | undefined; pid: number | undefined };

function errno(err: unknown): unknown {
  return (err as { code?: unknown })?.code;
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
  const owners = new OwnerCheck();
  try {
    await io.mkdir(store.layout.gc);
    await removeDeadPreps(store, owners);
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  }
  const token = ownedName();
  const ownerName = `${token}${OWNER_SUFFIX}`;
  const prep = join(store.layout.gc, `${PREP_PREFIX}${token}`);
  let renamed = false;
  try {
    await prepare(io, prep, ownerName, token);
    for (;;) {
      try {
        // Nothing that can fail comes between the rename and the return: a failure there would leave
        // a lock naming this live process, which every later collection waits for until it exits.
        await io.rename(prep, path);
        renamed = true;
        return { release: once(() => release(store, path, ownerName)) };
      } catch (err) {
        const code = errno(err);
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST' && code !== 'ENOTDIR' && code !== 'EISDIR') throw err;
      }
      const holder = await readHolder(io, path, new OwnerCheck());
      if (holder.kind === 'gone') continue; // Released or broken since: try again at once.
      if (holder.stale) {
        await breakDir(io, path, holder.stale);
        continue;
      }
      if (Date.now() >= deadline) {
        throw new TimeoutError(
          `another garbage collection (pid ${holder.pid || 'unknown'}) holds ${path}; try again when it has finished`,
          { pid: holder.pid || null },
        );
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  } finally {
    if (!renamed) await removeDir(io, prep, [ownerName]);
  }
}

function once(f: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => (done ??= f());
}

/** Makes the lock directory `prep` holding the owner file, written whole before it can be renamed into place. */
async function prepare(io: StoreIO, prep: string, ownerName: string, token: string): Promise<void> {
  await io.mkdir(prep);
  const fh = await io.open(join(prep, ownerName), constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600);
  try {
    const line = Buffer.from(`${token}\n`);
    for (let off = 0; off < line.length; ) off += await io.write(fh, line, off, line.length - off, off);
  } finally {
    await fh.close();
  }
}

/**
 * Our own owner file goes first, by its name: from then on a collector may
 * rename its directory over the empty one, so the rmdir that follows may
 * find another holder's (not empty) and leaves it. Should the unlink fail
 * and our file still stand, the whole directory, still ours (a directory
 * holding a file cannot be replaced), is renamed aside and removed: kept,
 * it would stop every collection while this process lives. An unlink that
 * reports an error although the file went (a disk answering late) has
 * freed the lock, which another collector may hold by now: it is left
 * (and so is the directory when even the lstat fails: kept until this
 * process exits is better than moving a lock that may be another's).
 */
async function release(store: Store, path: string, ownerName: string): Promise<void> {
  const io = store.io;
  try {
    await io.unlink(join(path, ownerName));
  } catch (err) {
    const stands =
      errno(err) !== 'ENOENT' &&
      (await io.lstat(join(path, ownerName)).then(
        () => true,
        () => false, // Unknown: moving what may be another holder's lock would be worse than keeping ours.
      ));
    if (stands) {
      const aside = join(store.layout.gc, `${PREP_PREFIX}${ownerName.slice(0, -OWNER_SUFFIX.length)}`);
      await io.rename(path, aside).then(
        () => removeDir(io, aside, [ownerName]),
        () => {},
      );
      return;
    }
  }
  await io.rmdir(path).catch(() => {});
}

/** Removes `dir` and the named files in it, best effort. */
async function removeDir(io: StoreIO, dir: string, names: readonly string[]): Promise<void> {
  for (const n of names) await io.unlink(join(dir, n)).catch(() => {});
  await io.rmdir(dir).catch(() => {});
}

/** Unlinks the dead owners' files by name, then the directory if that left it empty. */
async function breakDir(io: StoreIO, path: string, stale: readonly string[]): Promise<void> {
  for (const name of stale) {
    await io.unlink(join(path, name)).catch((err: unknown) => {
      if (errno(err) !== 'ENOENT') throw err;
    });
  }
  await io.rmdir(path).catch(() => {}); // Not empty: someone took the lock meanwhile.
}

/** Who holds `path`, and whether every owner named there is dead. */
async function readHolder(io: StoreIO, path: string, owners: OwnerCheck): Promise<Holder> {
  let names: string[];
  try {
    const st = await io.lstat(path);
    // A file, a FIFO, a symbolic link or anything else in the lock's place is no holder, and is never broken.
    if (!st.isDirectory()) return { kind: 'held', stale: undefined, pid: undefined };
    names = await io.readdir(path);
  } catch (err) {
    if (errno(err) === 'ENOENT') return { kind: 'gone' };
    if (errno(err) === 'ENOTDIR') return { kind: 'held', stale: undefined, pid: undefined };
    throw err;
  }
  // An empty directory (a breaker or releaser between its two steps, or a crash there): the rename replaces it.
  if (names.length === 0) return { kind: 'gone' };
  let pid: number | undefined;
  const stale: string[] = [];
  for (const name of names) {
    const p = ownerPid(name);
    pid ??= p;
    // Not an owner file of ours: nobody's to break.
    if (p === undefined || !name.endsWith(OWNER_SUFFIX)) return { kind: 'held', stale: undefined, pid };
    // A name with a token is judged by it alone; one without (no /proc) by the pid and the file's mtime, and
    // so is a token this process cannot check (its boot id unreadable): with a made-up mtime, a live owner
    // would look started after its file and so dead.
    const mtimeMs = await io.lstat(join(path, name)).then(
      (st) => st.mtimeMs,
      () => Date.now(),
    );
    if (owners.alive(p, mtimeMs, name)) return { kind: 'held', stale: undefined, pid: p };
    stale.push(name);
  }
  return { kind: 'held', stale, pid };
}

/**
 * Removes the directories dead collectors were preparing
 * (`gc/lock.prep-<owned name>`, left by a crash before their rename); a
 * live owner's are left alone.
 */
async function removeDeadPreps(store: Store, owners: OwnerCheck): Promise<void> {
  for (const name of await store.io.readdir(store.layout.gc)) {
    if (!name.startsWith(PREP_PREFIX)) continue;
    const stem = name.slice(PREP_PREFIX.length);
    const ownerName = `${stem}${OWNER_SUFFIX}`;
    const pid = ownerPid(ownerName);
    if (pid === undefined) continue;
    const at = join(store.layout.gc, name);
    const st = await store.io.lstat(at).catch(() => undefined);
    if (!st?.isDirectory() || owners.alive(pid, st.mtimeMs, ownerName)) continue;
    await removeDir(store.io, at, [ownerName]);
  }
}
