/**
 * The GC lock under racing collectors: a directory renamed into place,
 * broken by unlinking the dead owner's file by name, so a breaker that was
 * overtaken removes nothing of the new holder's. Each collector here is a
 * store instance of its own; one of them is held just before it breaks a
 * dead lock while the others take and release it.
 */
import { spawnSync } from 'node:child_process';
import { promises as fsp, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { acquireGcLock, type GcLock } from '../../store/gc/lock.js';
import { realIO, type StoreIO } from '../../store/io.js';
import { Store } from '../../store/store.js';
import { deadPid } from '../sessions/helpers.js';
import { FaultyIO } from '../support/faulty-io.js';
import { tempDir } from './helpers.js';

/** Where the GC lock of `store` stands (store/gc/lock.ts). */
const lockPath = (store: Store) => join(store.layout.gc, 'lock');

const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'latin1')
  .replace(/[^0-9a-f]/g, '')
  .slice(0, 8);

/** A gate: `wait()` resolves once `open()` was called; `reached` once someone waits. */
function gate() {
  let open!: () => void;
  let reached!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  const arrived = new Promise<void>((r) => {
    reached = r;
  });
  return {
    open,
    reached: arrived,
    wait: () => {
      reached();
      return opened;
    },
  };
}

/** The real filesystem, with `unlink` and `rename` of paths matching `at` held until `g` opens (once). */
function heldIO(at: (path: string) => boolean, g: ReturnType<typeof gate>): StoreIO {
  let armed = true;
  const hold = async (path: string) => {
    if (armed && at(path)) {
      armed = false;
      await g.wait();
    }
  };
  return {
    ...realIO,
    unlink: async (p) => {
      await hold(p);
      return realIO.unlink(p);
    },
    rename: async (from, to) => {
      await hold(from);
      return realIO.rename(from, to);
    },
  };
}

/** A lock directory left by a dead collector (its owner file named by a token of a dead pid). */
async function deadLock(store: Store): Promise<string> {
  const name = `${await deadPid()}-t12345b${boot}r0123456789ab.owner`;
  const lock = lockPath(store);
  await fsp.mkdir(lock, { recursive: true });
  await fsp.writeFile(join(lock, name), `${name.slice(0, -6)}\n`);
  return name;
}

async function openStores(n: number, io?: (i: number) => StoreIO | undefined) {
  const root = join(await tempDir('sluice-gc-lock-'), 'store');
  const stores: Store[] = [];
  for (let i = 0; i < n; i++) {
    const custom = io?.(i);
    stores.push(await Store.open(root, custom ? { io: custom } : {}));
  }
  return { root, stores };
}

/** The names in gc/ that belong to the lock (the lock and any preparation). */
async function lockEntries(store: Store): Promise<string[]> {
  return (await fsp.readdir(store.layout.gc)).filter((n) => n.startsWith('lock'));
}

describe('the GC lock with racing collectors', () => {
  it('a breaker overtaken between judging a dead lock and breaking it leaves the new holder alone', async () => {
    const g = gate();
    const { stores } = await openStores(3, (i) =>
      i === 1 ? heldIO((p) => /\/gc\/lock\/[^/]+\.owner$/.test(p), g) : undefined,
    );
    const [a, b, c] = stores as [Store, Store, Store];
    const stale = await deadLock(a);
    // B judges the lock dead and stops just before it unlinks the dead owner's file.
    const bTaking = acquireGcLock(b, 10_000);
    await g.reached;
    // A breaks the same dead lock and takes it.
    const aLock = await acquireGcLock(a, 1000);
    const aHolds = await fsp.readdir(lockPath(a));
    expect(aHolds).toHaveLength(1);
    expect(aHolds[0]).not.toBe(stale);
    // B goes on: the dead owner's file is gone and the directory is not empty, so B waits for A.
    g.open();
    // C, arriving now, finds A holding the lock too.
    await expect(acquireGcLock(c, 200)).rejects.toMatchObject({ code: 'ETIMEOUT', details: { pid: process.pid } });
    expect(await fsp.readdir(lockPath(a))).toEqual(aHolds);
    let bDone = false;
    void bTaking.then(() => {
      bDone = true;
    });
    await new Promise((r) => setTimeout(r, 150));
    expect(bDone).toBe(false);
    await aLock.release();
    const bLock = await bTaking;
    const bHolds = await fsp.readdir(lockPath(b));
    expect(bHolds).toHaveLength(1);
    expect(bHolds).not.toEqual(aHolds);
    await bLock.release();
    expect(await lockEntries(a)).toEqual([]);
    for (const s of stores) await s.close();
  });

  it('many collectors breaking one dead lock at once: never two holders, and nothing left', async () => {
    const { stores } = await openStores(6);
    await deadLock(stores[0] as Store);
    let inside = 0;
    let most = 0;
    const holders: string[] = [];
    await Promise.all(
      stores.map(async (s) => {
        for (let round = 0; round < 5; round++) {
          const lock: GcLock = await acquireGcLock(s, 20_000);
          inside++;
          most = Math.max(most, inside);
          const names = await fsp.readdir(lockPath(s));
          expect(names).toHaveLength(1);
          holders.push(names[0] as string);
          await new Promise((r) => setImmediate(r));
          inside--;
          await lock.release();
        }
      }),
    );
    expect(most).toBe(1);
    // 30 takings, each under a fresh owner name.
    expect(new Set(holders).size).toBe(30);
    expect(await lockEntries(stores[0] as Store)).toEqual([]);
    for (const s of stores) await s.close();
  });

  it("an empty lock directory and a dead collector's half-prepared lock are taken over and removed", async () => {
    const { stores } = await openStores(1);
    const s = stores[0] as Store;
    const lock = lockPath(s);
    await fsp.mkdir(lock, { recursive: true });
    // A collector killed while it prepared its lock directory, and one killed between a release's two steps.
    const dead = `${await deadPid()}-t12345b${boot}r00aa11bb22cc`;
    const prep = join(s.layout.gc, `lock.prep-${dead}`);
    await fsp.mkdir(prep);
    await fsp.writeFile(join(prep, `${dead}.owner`), `${dead}\n`);
    // A live collector's preparation (this process) is left alone.
    const mine = join(s.layout.gc, `lock.prep-${process.pid}-t${'1'}b${boot}r0000ffff0000`);
    await fsp.mkdir(mine);
    const held = await acquireGcLock(s, 1000);
    expect((await fsp.readdir(lock)).map((n) => n.startsWith(`${process.pid}-`))).toEqual([true]);
    await held.release();
    expect(await lockEntries(s)).toEqual([`lock.prep-${process.pid}-t1b${boot}r0000ffff0000`]);
    await fsp.rmdir(mine);
    await s.close();
  });

  it('a symbolic link at the lock is never followed or broken: the collection times out', async () => {
    const { stores } = await openStores(1);
    const s = stores[0] as Store;
    const elsewhere = join(s.root, '..', 'elsewhere');
    await fsp.mkdir(elsewhere, { recursive: true });
    const name = `${await deadPid()}-t12345b${boot}r0123456789ab.owner`;
    await fsp.writeFile(join(elsewhere, name), 'x\n');
    await fsp.mkdir(s.layout.gc, { recursive: true });
    await fsp.symlink(elsewhere, lockPath(s));
    await expect(acquireGcLock(s, 100)).rejects.toMatchObject({ code: 'ETIMEOUT' });
    expect(await fsp.readdir(elsewhere)).toEqual([name]);
    // Nothing of ours is left beside it.
    expect(await lockEntries(s)).toEqual(['lock']);
    await s.close();
  });

  it('a release whose unlink reports an error after removing its file leaves the next holder alone', async () => {
    const g = gate();
    // The owner file's unlink takes effect and then reports EIO (a disk answering late or twice).
    const lateError: StoreIO = {
      ...realIO,
      unlink: async (p) => {
        await realIO.unlink(p);
        if (/\/gc\/lock\/[^/]+\.owner$/.test(p)) {
          await g.wait();
          throw Object.assign(new Error(`EIO: i/o error, unlink '${p}'`), {
            code: 'EIO',
            errno: -5,
            syscall: 'unlink',
          });
        }
      },
    };
    const { stores } = await openStores(3, (i) => (i === 0 ? lateError : undefined));
    const [a, b, c] = stores as [Store, Store, Store];
    const releasing = (await acquireGcLock(a, 1000)).release();
    await g.reached;
    // Between A's unlink and its error, B takes the lock (the directory was empty).
    const bLock = await acquireGcLock(b, 1000);
    const bHolds = await fsp.readdir(lockPath(b));
    g.open();
    await releasing;
    // A's release moved nothing of B's: B still holds, and C waits.
    expect(await fsp.readdir(lockPath(b))).toEqual(bHolds);
    await expect(acquireGcLock(c, 200)).rejects.toMatchObject({ code: 'ETIMEOUT' });
    await bLock.release();
    expect(await lockEntries(a)).toEqual([]);
    for (const s of stores) await s.close();
  });

  it('a failure at any step of preparing the lock fails the collection (EDISK) and leaves nothing', async () => {
    const steps = [
      { op: 'mkdir', errno: 'EACCES' },
      { op: 'open', errno: 'ENOSPC' },
      { op: 'write', errno: 'ENOSPC' },
      { op: 'write', errno: 'EIO' },
      { op: 'rename', errno: 'EIO' },
    ] as const;
    for (const step of steps) {
      const root = join(await tempDir('sluice-gc-lock-'), 'store');
      const io = new FaultyIO(root);
      const s = await Store.open(root, { io });
      await fsp.mkdir(s.layout.gc, { recursive: true });
      const fault = io.inject({ op: step.op, when: (r) => r.path.includes('/gc/lock.prep-'), errno: step.errno });
      const err = await acquireGcLock(s, 100).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect({ step, fired: fault.fired, err }).toMatchObject({ step, fired: 1, err: { code: 'EDISK' } });
      io.reset();
      expect({ step, left: await lockEntries(s) }).toEqual({ step, left: [] });
      // And the next collection takes the lock at once.
      await (await acquireGcLock(s, 100)).release();
      await s.close();
    }
  });

  it('a regular file, a FIFO, or a directory holding anything but one owner file, at the lock is never broken', async () => {
    const { stores } = await openStores(1);
    const s = stores[0] as Store;
    const lock = lockPath(s);
    await fsp.mkdir(s.layout.gc, { recursive: true });
    // A regular file naming a dead pid: nobody's lock, kept as it is.
    await fsp.writeFile(lock, `${await deadPid()}\n`);
    await expect(acquireGcLock(s, 100)).rejects.toMatchObject({ code: 'ETIMEOUT', details: { pid: null } });
    expect((await fsp.lstat(lock)).isFile()).toBe(true);
    expect(await lockEntries(s)).toEqual(['lock']);
    await fsp.unlink(lock);
    // A FIFO: never opened for a blocking read, never removed.
    expect(spawnSync('mkfifo', [lock]).status).toBe(0);
    await expect(acquireGcLock(s, 100)).rejects.toMatchObject({ code: 'ETIMEOUT', details: { pid: null } });
    expect((await fsp.lstat(lock)).isFIFO()).toBe(true);
    expect(await lockEntries(s)).toEqual(['lock']);
    await fsp.unlink(lock);
    // A directory holding a dead owner's file and something else (an operator's, a foreign tool's): kept whole.
    const dead = await deadLock(s);
    await fsp.writeFile(join(lock, 'notes.txt'), 'x\n');
    await expect(acquireGcLock(s, 100)).rejects.toMatchObject({ code: 'ETIMEOUT' });
    expect((await fsp.readdir(lock)).sort()).toEqual([dead, 'notes.txt'].sort());
    expect(await lockEntries(s)).toEqual(['lock']);
    await fsp.rm(lock, { recursive: true });
    await s.close();
  });
});
