/**
 * The store-wide GC lock (publishers never take it): the directory `gc/lock`
 * holding one file named for its owner (store/owners.ts), made under an
 * owned name and renamed into place. rename(2) replaces a missing or empty
 * directory and fails on a non-empty one, and that is the protocol: taking
 * succeeds only with no owner file in place; breaking a dead owner's lock
 * (judged by its token, not clocks) unlinks that owner's file by name, then
 * rmdirs, so an overtaken breaker removes nothing of a new holder's;
 * releasing does the same with our own file. No interleaving has two
 * holders. Anything else at `gc/lock` is nobody's lock and never broken.
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

/** Waits up to `timeoutMs` for a live holder. @throws ETIMEOUT when it holds longer. */
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
 * Our owner file goes first, by name: then another collector may rename its
 * directory over ours, and the rmdir leaves that one. If the unlink fails and
 * our file stands, the directory (still ours) is renamed aside and removed,
 * or it would stop every collection. An unlink that errs although the file
 * went has freed the lock, which another may hold by now: it is left.
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

// `gc/lock.prep-<owned name>`, left by a crash before the rename; a live owner's stay.
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
