/**
 * Whether the owner of a file in the store still lives is decided from the
 * file's name (the owner's start in clock ticks since boot, and the boot's
 * id), not from timestamps: a clock stepped back, which makes a live owner's
 * files look older than the owner, no longer makes a collection take the
 * owner for dead and rewrite the pack it is still appending to.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { promises as fsp, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { OwnerCheck, ownedName, ownerPid, ownerToken } from '../../store/owners.js';
import { Store } from '../../store/store.js';
import { FaultyIO } from '../support/faulty-io.js';
import { tempDir } from './helpers.js';

const DIST_STORE = fileURLToPath(new URL('../../dist/store/store.js', import.meta.url));
const children: ChildProcess[] = [];

afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

/** Field 22 of /proc/<pid>/stat (start, clock ticks since boot). */
function ticksOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] as string;
}

const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'latin1')
  .replace(/[^0-9a-f]/g, '')
  .slice(0, 8);

/** A process that lives until killed. */
function sleeper(): ChildProcess {
  const c = spawn('sleep', ['1000'], { stdio: 'ignore' });
  children.push(c);
  return c;
}

/** A new store with its gc/ directory made, the path of its GC lock, and roots that reference nothing. */
async function lockTestStore() {
  const store = await Store.open(join(await tempDir(), 'store'));
  await fsp.mkdir(store.layout.gc, { recursive: true });
  const noRoots = {
    roots: async () => ({
      digests: new Set<string>(),
      appended: async () => new Set<string>(),
      close: async () => {},
    }),
  };
  return { store, lock: join(store.layout.gc, 'lock'), noRoots };
}

describe('owners are told apart by their start, not by timestamps', () => {
  it('names carry this process start and boot; the pid is still parsed from them', () => {
    const name = `${ownedName()}.pin`;
    expect(ownerPid(name)).toBe(process.pid);
    expect(ownerToken(name)).toEqual({ ticks: ticksOf(process.pid), boot });
  });

  it('a live owner is alive however old its file looks; another start or boot with its pid is not', () => {
    const c = sleeper();
    const pid = c.pid as number;
    const owners = new OwnerCheck();
    // mtime 0 (1970): by the timestamp rule this owner started long after its file, so it would be dead.
    expect(owners.alive(pid, 0, `${pid}-t${ticksOf(pid)}b${boot}r0123.pin`)).toBe(true);
    expect(owners.alive(pid, 0, `${pid}-t${Number(ticksOf(pid)) + 1}b${boot}r0123.pin`)).toBe(false);
    expect(owners.alive(pid, Date.now(), `${pid}-t${ticksOf(pid)}b00000000r0123.pin`)).toBe(false);
    // A name without the token (an older sluice) keeps the timestamp rule.
    expect(owners.alive(pid, 0, `${pid}-0123abcd.pin`)).toBe(false);
    expect(owners.alive(pid, Date.now(), `${pid}-0123abcd.pin`)).toBe(true);
  });

  it("a collection leaves a live store's pack alone when the clock made it look older than its owner", async () => {
    const root = join(await tempDir('sluice-owner-token-'), 'store');
    // Another process owns a pack: it publishes one small blob, then waits.
    const child = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import { Store } from ${JSON.stringify(DIST_STORE)};
         const s = await Store.open(${JSON.stringify(root)});
         const b = await s.publishBytes('owned by a live store\\n');
         process.stdout.write(b.digest + '\\n');
         setInterval(() => {}, 1 << 30);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(child);
    const digest = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout?.on('data', (b: Buffer) => {
        out += b.toString();
        if (out.includes('\n')) resolve(out.trim());
      });
      child.once('exit', (code) => reject(new Error(`the owner exited (${code})`)));
    });
    const packs = (await fsp.readdir(join(root, 'packs'))).filter((n) => n.endsWith('.pack'));
    expect(packs.map(ownerPid)).toEqual([child.pid]);
    // The clock stepped back: the pack now looks written in 2001, long before its owner started.
    const past = new Date('2001-01-01T00:00:00Z');
    await fsp.utimes(join(root, 'packs', packs[0] as string), past, past);
    const collector = await Store.open(root);
    const report = await collector.backend.collect(
      { roots: async () => ({ digests: new Set(), appended: async () => new Set(), close: async () => {} }) },
      { graceMs: 0 },
    );
    // Unreferenced, but its pack belongs to a live store still appending to it: not rewritten.
    expect(report.packsRemoved).toBe(0);
    expect((await fsp.readdir(join(root, 'packs'))).filter((n) => n.endsWith('.pack'))).toEqual(packs);
    expect((await collector.readPage(`artifact://${digest}`)).content).toBe('owned by a live store\n');
    await collector.close();
  });

  it("a GC lock names its holder by token: a live collector's is kept however old it looks, a dead one's broken", async () => {
    const { store, lock, noRoots } = await lockTestStore();
    // A live collector (the sleeper stands for it) whose owner file looks written in 2001, before it started.
    const c = sleeper();
    const pid = c.pid as number;
    const live = join(lock, `${pid}-t${ticksOf(pid)}b${boot}r0123456789ab.owner`);
    await fsp.mkdir(lock);
    await fsp.writeFile(live, `${pid}\n`);
    const past = new Date('2001-01-01T00:00:00Z');
    await fsp.utimes(live, past, past);
    await expect(store.backend.collect(noRoots, { graceMs: 0, lockTimeoutMs: 100 })).rejects.toMatchObject({
      code: 'ETIMEOUT',
      details: { pid },
    });
    // The same pid started at another tick is another process: that lock is broken and the collection runs.
    await fsp.rename(live, join(lock, `${pid}-t${Number(ticksOf(pid)) + 1}b${boot}r0123456789ab.owner`));
    const report = await store.backend.collect(noRoots, { graceMs: 0, lockTimeoutMs: 100 });
    expect(report.dryRun).toBe(false);
    expect((await fsp.readdir(store.layout.gc)).filter((n) => n.startsWith('lock'))).toEqual([]);
    expect(await fsp.readdir(store.layout.tmp)).toEqual([]);
    await store.close();
  });

  it("a GC lock whose owner file has no token (no /proc) is its live holder's however old it is", async () => {
    const { store, lock, noRoots } = await lockTestStore();
    // ownedName() without /proc: `<pid>-<random>`. The holder (this process) lives; the lock is a minute old.
    const owner = join(lock, `${process.pid}-0123456789ab.owner`);
    await fsp.mkdir(lock);
    await fsp.writeFile(owner, `${process.pid}\n`);
    const minuteAgo = new Date(Date.now() - 60_000);
    await fsp.utimes(owner, minuteAgo, minuteAgo);
    await expect(store.backend.collect(noRoots, { graceMs: 0, lockTimeoutMs: 100 })).rejects.toMatchObject({
      code: 'ETIMEOUT',
      details: { pid: process.pid },
    });
    expect(await fsp.readdir(lock)).toEqual([`${process.pid}-0123456789ab.owner`]);
    await fsp.rm(lock, { recursive: true });
    expect(await fsp.readdir(store.layout.tmp)).toEqual([]);
    await store.close();
  });

  it('a failing unlink of its own owner file at release leaves no lock behind for the next collection', async () => {
    const root = join(await tempDir(), 'store');
    const io = new FaultyIO(root);
    const store = await Store.open(root, { io });
    const noRoots = {
      roots: async () => ({
        digests: new Set<string>(),
        appended: async () => new Set<string>(),
        close: async () => {},
      }),
    };
    // The release's first step fails: the directory, still ours, is renamed aside and removed instead.
    const fault = io.inject({ op: 'unlink', when: (r) => /\/gc\/lock\/[^/]+\.owner$/.test(r.path), errno: 'EIO' });
    const first = await store.backend.collect(noRoots, { graceMs: 0, lockTimeoutMs: 100 });
    expect(fault.fired).toBe(1);
    expect(first.dryRun).toBe(false);
    io.reset();
    // This process lives: a lock it left would make every later collection time out.
    const report = await store.backend.collect(noRoots, { graceMs: 0, lockTimeoutMs: 100 });
    expect(report.dryRun).toBe(false);
    expect((await fsp.readdir(store.layout.gc)).filter((n) => n.startsWith('lock'))).toEqual([]);
    expect(await fsp.readdir(store.layout.tmp)).toEqual([]);
    await store.close();
  });

  it('a collection writes its lock whole before it is visible, holding its own token', async () => {
    const root = join(await tempDir(), 'store');
    const store = await Store.open(root);
    const seen: { names: string[]; text: string }[] = [];
    await store.backend.collect(
      {
        roots: async () => {
          const lock = join(store.layout.gc, 'lock');
          const names = await fsp.readdir(lock);
          seen.push({ names, text: await fsp.readFile(join(lock, names[0] as string), 'utf8') });
          return { digests: new Set(), appended: async () => new Set(), close: async () => {} };
        },
      },
      { graceMs: 0 },
    );
    // The lock is a directory holding one file named for its owner, which also holds the token.
    expect(seen).toHaveLength(1);
    const { names, text } = seen[0] as { names: string[]; text: string };
    expect(names).toEqual([`${text.trim()}.owner`]);
    expect(ownerPid(names[0] as string)).toBe(process.pid);
    expect(ownerToken(text.trim())).toEqual({ ticks: ticksOf(process.pid), boot });
    expect(await fsp.readdir(store.layout.tmp)).toEqual([]);
    await store.close();
  });
});
