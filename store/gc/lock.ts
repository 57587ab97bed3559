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
 * and no step rests on a timestamp (the earlier lock file, broken by
 * renaming it aside, could be replaced between a breaker's check and its
 * rename, and three breakers racing on one dead lock could end with two
 * holders).
 *
 * Locks written by older versions are a regular file `gc/lock` holding a
 * bare pid, a token, or `<pid>-<random>` (written without /proc). Such a
 * file makes the rename fail (ENOTDIR); it is judged by its content (the
 * token, else the old rule: the pid lives and did not start after the lock
 * was written; without a valid pid, abandoned after
 * {@link UNWRITTEN_STALE_MS}) and, when stale, broken by
 * {@link breakLegacy}: renamed aside over a file of ours (which a directory,
 * this version's lock, cannot be) and removed only if it is still the file
 * judged, else linked back (an older collector took the lock meanwhile).
 */
import { constants } from 'node:fs';
import { join } from 'node:path';
import { TimeoutError, toSluiceError } from '../../engine/protocol/errors.js';
import type { StoreIO } from '../io.js';
import { OwnerCheck, ownedName, ownerPid, ownerToken } from '../owners.js';
import type { Store } from '../store.js';

/** A held GC lock. */
export interface GcLock {
  release(): Promise<void>;
}

const POLL_MS = 50;
/** A lock directory being prepared: `gc/lock.prep-<owned name>`. */
const PREP_PREFIX = 'lock.prep-';
/** An older version's lock file moved aside to be broken: `gc/lock.stale-<owned name>` (older versions' too). */
const STALE_PREFIX = 'lock.stale-';
/** The owner file inside a lock directory. */
const OWNER_SUFFIX = '.owner';

/** Path of the GC lock of `store` (a directory; a regular file when an older version wrote it). */
export function gcLockPath(store: Store): string {
  return join(store.layout.gc, 'lock');
}

/** What stands at `gc/lock` when the rename failed. */
type Holder =
  | { kind: 'gone' }
  | { kind: 'dir'; stale: string[] | undefined; pid: number | undefined }
  | { kind: 'file'; stale: boolean; pid: number | undefined; judged?: LegacyFile };

/** An older version's lock file as it was read: its inode and its content. */
interface LegacyFile {
  ino: number;
  text: string;
}

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
      if (holder.kind === 'dir' && holder.stale) {
        await breakDir(io, path, holder.stale);
        continue;
      }
      if (holder.kind === 'file' && holder.stale) {
        // Any failure here would fail every try alike, so it ends the collection rather than spin on it.
        await breakLegacy(store, path, holder.judged);
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
    if (st.isFile()) return readLegacyHolder(io, path, owners);
    // A FIFO, a symbolic link or anything else in the lock's place is no holder, and is never broken.
    if (!st.isDirectory()) return { kind: 'file', stale: false, pid: undefined };
    names = await io.readdir(path);
  } catch (err) {
    if (errno(err) === 'ENOENT') return { kind: 'gone' };
    if (errno(err) === 'ENOTDIR') return readLegacyHolder(io, path, owners);
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
    if (p === undefined || !name.endsWith(OWNER_SUFFIX)) return { kind: 'dir', stale: undefined, pid };
    // A name with a token is judged by it alone; one without (no /proc) by the pid and the file's mtime, and
    // so is a token this process cannot check (its boot id unreadable): with a made-up mtime, a live owner
    // would look started after its file and so dead.
    const mtimeMs = await io.lstat(join(path, name)).then(
      (st) => st.mtimeMs,
      () => Date.now(),
    );
    if (owners.alive(p, mtimeMs, name)) return { kind: 'dir', stale: undefined, pid: p };
    stale.push(name);
  }
  return { kind: 'dir', stale, pid };
}

/**
 * An older version's lock file, never partial in recent versions; one
 * without a valid pid was being written by an older one, unless it has been
 * so for longer than this.
 */
const UNWRITTEN_STALE_MS = 10_000;

async function readLegacyHolder(io: StoreIO, path: string, owners: OwnerCheck): Promise<Holder> {
  let fh: Awaited<ReturnType<StoreIO['open']>>;
  try {
    // Without blocking or following a link: replaced by a FIFO since the lstat, it is no holder.
    fh = await io.open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (err) {
    if (errno(err) === 'ENOENT') return { kind: 'gone' };
    return { kind: 'file', stale: false, pid: undefined };
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) return { kind: 'file', stale: false, pid: undefined };
    const text = (await fh.readFile()).toString('utf8').trim();
    const judged = { ino: st.ino, text };
    // A token (`<pid>-t…`); an owned name without one (`<pid>-<random>`), judged by the pid as a bare pid is.
    const token = ownerToken(text) ? text : undefined;
    const m = /^([1-9][0-9]{0,9})(?:-[0-9a-zA-Z]+)?$/.exec(text);
    if (!m) return { kind: 'file', stale: Date.now() - st.mtimeMs > UNWRITTEN_STALE_MS, pid: undefined, judged };
    const pid = Number(m[1]);
    return { kind: 'file', stale: !owners.alive(pid, st.mtimeMs, token), pid, judged };
  } catch {
    return { kind: 'file', stale: false, pid: undefined };
  } finally {
    await fh.close().catch(() => {});
  }
}

/**
 * Breaks an older version's lock file judged stale (`judged`: as it was read
 * then). Unlinking `gc/lock` by name could remove a lock an older
 * collector took since (it breaks the same file its own way, then links its
 * own), so the file is renamed aside instead, over a placeholder file of
 * ours: rename(2) will not put a directory over a file (ENOTDIR), so a lock
 * directory of this version taken since is never moved either. What was
 * moved is removed only when it is the file judged (same inode, same
 * content, which names its owner); anything else is linked back. Linking
 * back fails only if yet another collector took `gc/lock` in between: the
 * race older versions have among themselves, which no step of ours adds to.
 */
async function breakLegacy(store: Store, path: string, judged: LegacyFile | undefined): Promise<void> {
  const io = store.io;
  const aside = join(store.layout.gc, `${STALE_PREFIX}${ownedName()}`);
  const fh = await io.open(aside, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600);
  try {
    await fh.close();
    try {
      await io.rename(path, aside);
    } catch (err) {
      const code = errno(err);
      // Broken by someone else, or a lock directory of this version stands there now: nothing to break.
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') return;
      throw err;
    }
    const moved = await readLegacyHolder(io, aside, new OwnerCheck());
    if (judged && moved.kind === 'file' && moved.judged?.ino === judged.ino && moved.judged.text === judged.text) {
      return;
    }
    await io.link(aside, path).catch(() => {});
  } finally {
    await io.unlink(aside).catch(() => {});
  }
}

/**
 * Removes what dead collectors left beside the lock: directories they were
 * preparing (`gc/lock.prep-<owned name>`, left by a crash before their
 * rename) and lock files they had moved aside to break
 * (`gc/lock.stale-<owned name>`). A live owner's are left alone, and so
 * are older versions' files moved aside (`gc/lock.stale-<pid>-<random>`,
 * no token): judged by the pid and the file's mtime, which renaming kept
 * from the lock, a live breaker would look dead, and the file may be a
 * fresh lock it is about to link back.
 */
async function removeDeadPreps(store: Store, owners: OwnerCheck): Promise<void> {
  for (const name of await store.io.readdir(store.layout.gc)) {
    const prep = name.startsWith(PREP_PREFIX);
    if (!prep && !name.startsWith(STALE_PREFIX)) continue;
    const stem = name.slice(prep ? PREP_PREFIX.length : STALE_PREFIX.length);
    const pid = ownerPid(`${stem}${OWNER_SUFFIX}`);
    if (pid === undefined || (!prep && !ownerToken(stem))) continue;
    const at = join(store.layout.gc, name);
    const st = await store.io.lstat(at).catch(() => undefined);
    if (!st || !(prep ? st.isDirectory() : st.isFile())) continue;
    if (owners.alive(pid, st.mtimeMs, `${stem}${OWNER_SUFFIX}`)) continue;
    if (prep) await removeDir(store.io, at, [`${stem}${OWNER_SUFFIX}`]);
    else await store.io.unlink(at).catch(() => {});
  }
}
