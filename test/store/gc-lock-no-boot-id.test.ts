/**
 * A collector that cannot read this boot's id (/proc/sys masked, or a
 * transient EMFILE on its one read, which is then remembered) still finds
 * /proc/<pid>/stat: it must judge a live collector's lock, named by a token
 * it cannot check, by the rule for names without one, never as dead.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { acquireGcLock } from '../../store/gc/lock.js';
import { Store } from '../../store/store.js';
import { tempDir } from './helpers.js';

/** Where the GC lock of `store` stands (store/gc/lock.ts). */
const lockPath = (store: Store) => join(store.layout.gc, 'lock');

const BOOT_ID = '/proc/sys/kernel/random/boot_id';

vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs')>();
  const readFileSync = ((path: fs.PathOrFileDescriptor, ...rest: unknown[]) => {
    if (path === BOOT_ID)
      throw Object.assign(new Error(`EMFILE: too many open files, open '${BOOT_ID}'`), { code: 'EMFILE' });
    return (real.readFileSync as (...a: unknown[]) => unknown)(path, ...rest);
  }) as typeof real.readFileSync;
  return { ...real, readFileSync, default: { ...real, readFileSync } };
});

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

describe('the GC lock when this boot id cannot be read', () => {
  it("a live collector's lock named by a token is kept, not broken", async () => {
    const realFs = await vi.importActual<typeof import('node:fs')>('node:fs');
    expect(() => fs.readFileSync(BOOT_ID)).toThrow(/EMFILE/);
    const boot = realFs
      .readFileSync(BOOT_ID, 'latin1')
      .replace(/[^0-9a-f]/g, '')
      .slice(0, 8);
    // The live collector (a sleeper stands for it), with the token it wrote where the boot id could be read.
    const c = spawn('sleep', ['1000'], { stdio: 'ignore' });
    children.push(c);
    const pid = c.pid as number;
    await new Promise((r) => c.once('spawn', r));
    const stat = realFs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    const ticks = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] as string;
    const store = await Store.open(join(await tempDir('sluice-gc-lock-'), 'store'));
    const lock = lockPath(store);
    const name = `${pid}-t${ticks}b${boot}r0123456789ab.owner`;
    await realFs.promises.mkdir(lock, { recursive: true });
    await realFs.promises.writeFile(join(lock, name), `${name.slice(0, -6)}\n`);
    await expect(acquireGcLock(store, 200)).rejects.toMatchObject({ code: 'ETIMEOUT', details: { pid } });
    expect(await realFs.promises.readdir(lock)).toEqual([name]);
    // Nothing of ours is left beside it.
    expect((await realFs.promises.readdir(store.layout.gc)).filter((n) => n.startsWith('lock'))).toEqual(['lock']);
    await realFs.promises.rm(lock, { recursive: true });
    await store.close();
  });
});
