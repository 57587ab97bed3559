/**
 * No tool process outlives its engine: SIGKILL of an SDK host running a bash
 * call leaves nothing running (its watchdog kills the call's process group
 * when the engine's end of their pipe closes), and when the watchdog died
 * with the engine, the next engine opened on the store, or the next
 * collection, kills the group from the journal the watchdog kept. How it
 * showed before: the call's processes ran on under init.
 *
 * The waits below only bound a failing test; what is asserted is that the
 * processes end, never how fast.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { promises as fsp, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import { reapOrphans } from '../../engine/processes/orphans.js';
import { ProcessGuard } from '../../engine/processes/process-guard.js';
import { startWatchdog } from '../../engine/processes/watchdog.js';
import { collectGarbage } from '../../engine/sessions/gc.js';
import { Store } from '../../store/store.js';
import { deadPid } from '../sessions/helpers.js';
import { tempDir } from '../store/helpers.js';
import { closeEngines, openEngine, pgrep, uniqueSleep } from '../support/engines.js';
import { eventually, running, startHost, stopHosts, watchdogOf } from '../support/lifecycle-host.js';

const spawned: ChildProcess[] = [];

afterEach(async () => {
  await stopHosts();
  await closeEngines();
  for (const child of spawned.splice(0)) {
    // Only while the leader is not reaped (alive, or a zombie of ours): its pid, the group's id, cannot
    // have been handed to another process then.
    if (child.exitCode !== null || child.signalCode !== null) continue;
    try {
      process.kill(-(child.pid as number), 'SIGKILL');
    } catch {
      // Gone.
    }
  }
});

/** The first 8 hex digits of this boot's id, as owned names carry it. */
function bootOf(): string {
  return readFileSync('/proc/sys/kernel/random/boot_id', 'latin1')
    .replace(/[^0-9a-f]/g, '')
    .slice(0, 8);
}

/** Now, in clock ticks since boot (what the watchdog stamps). */
function uptimeTicks(): number {
  const [s, cs] = (readFileSync('/proc/uptime', 'latin1').split(' ')[0] as string).split('.');
  return Number(s) * 100 + Number(cs);
}

/** Field 22 of /proc/<pid>/stat: the process's start in clock ticks since boot. */
function startTicksOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
}

/** A detached `sleep` (its own process group), as a tool would start one. */
function detachedSleep(): number {
  const child = spawn('sleep', ['1000'], { detached: true, stdio: 'ignore' });
  child.unref();
  spawned.push(child);
  return child.pid as number;
}

/** A store whose engine and watchdog were both killed while a call's `sleep` ran; the sleep runs on. */
async function orphaned(): Promise<{ store: string; sleeper: ReturnType<typeof uniqueSleep> }> {
  const store = join(await tempDir(), 'store');
  const sleeper = uniqueSleep();
  const host = await startHost(store, 's', `echo started; ${sleeper.command}`);
  const [watchdog] = await watchdogOf(host.pid);
  process.kill(watchdog as number, 'SIGKILL');
  host.child.kill('SIGKILL');
  await host.exited;
  expect(await eventually(() => !running(watchdog as number))).toBe(true);
  return { store, sleeper };
}

/**
 * A store with procs/ made, a dead engine pid, the path of a journal of that engine (named with this boot's
 * id), and a detached group with its start in ticks since boot.
 */
async function stampedSetup() {
  const store = await Store.open(join(await tempDir(), 'store'));
  await fsp.mkdir(store.layout.procs, { recursive: true });
  const dead = await deadPid();
  const journal = (tag: string) => join(store.layout.procs, `${dead}-t1b${bootOf()}r${tag}.pgids`);
  const fresh = detachedSleep();
  return { store, dead, journal, fresh, started: startTicksOf(fresh) };
}

/**
 * The guard's one journal in `dir`/procs lists group `a`, and closing the guard (end of file for
 * its watchdog) kills the group and removes the journal: no watchdog is left.
 */
async function journalsThenKills(dir: string, guard: ProcessGuard, a: number): Promise<void> {
  // The watchdog writes it in its own time.
  expect(await eventually(async () => (await fsp.readdir(join(dir, 'procs')).catch(() => [])).length === 1)).toBe(true);
  const [journal] = await fsp.readdir(join(dir, 'procs'));
  expect(journal).toMatch(/\.pgids$/);
  const path = join(dir, 'procs', journal as string);
  expect(await eventually(async () => new RegExp(`^\\+${a} [0-9]+\\n$`).test(await fsp.readFile(path, 'utf8')))).toBe(
    true,
  );
  await guard.close();
  expect(await eventually(() => !running(a))).toBe(true);
  expect(await fsp.readdir(join(dir, 'procs'))).toEqual([]);
  expect(await watchdogOf(process.pid)).toEqual([]);
}

async function gone(marker: string): Promise<boolean> {
  return eventually(async () => (await pgrep(marker)).length === 0);
}

describe('tool processes and the death of their engine', () => {
  it('SIGKILL of the engine: its watchdog kills the call’s process group, then goes, and removes its journal', async () => {
    const store = join(await tempDir(), 'store');
    const sleeper = uniqueSleep();
    const host = await startHost(store, 's', `echo started; ${sleeper.command}`);
    expect(await pgrep(sleeper.marker)).toHaveLength(1);
    const [watchdog] = await watchdogOf(host.pid);
    expect(watchdog).toBeDefined();
    expect(await fsp.readdir(join(store, 'procs'))).toHaveLength(1);
    const t0 = Date.now();
    host.child.kill('SIGKILL');
    expect(await gone(sleeper.marker)).toBe(true);
    console.log(`the group was gone ${Date.now() - t0} ms after the SIGKILL`);
    expect(await eventually(() => !running(watchdog as number))).toBe(true);
    expect(await eventually(async () => (await fsp.readdir(join(store, 'procs'))).length === 0)).toBe(true);
  });

  it('engine and watchdog killed together: the next Engine.open kills the orphaned group', async () => {
    const { store, sleeper } = await orphaned();
    // Nothing left to kill it: it runs on.
    expect(await pgrep(sleeper.marker)).toHaveLength(1);
    const engine = await Engine.open({ store, cwd: await tempDir() });
    try {
      expect(await gone(sleeper.marker)).toBe(true);
      expect(await eventually(async () => (await fsp.readdir(join(store, 'procs'))).length === 0)).toBe(true);
    } finally {
      await engine.close();
    }
  });

  it('and a collection does it too, reporting the group', async () => {
    const { store, sleeper } = await orphaned();
    // The watchdog stamped its line with the time since boot, and named its journal with the engine's token.
    const [name] = await fsp.readdir(join(store, 'procs'));
    expect(name).toMatch(new RegExp(`^[1-9][0-9]*-t[0-9]+b${bootOf()}r[0-9a-f]+\\.pgids$`));
    const lines = (await fsp.readFile(join(store, 'procs', name as string), 'utf8')).trim().split('\n');
    expect(lines.every((l) => /^[+-][1-9][0-9]* [0-9]+$/.test(l))).toBe(true);
    expect(Number((lines.at(-1) as string).split(' ')[1])).toBeLessThanOrEqual(uptimeTicks());
    const s = await Store.open(store);
    const report = await collectGarbage(s, { graceMs: 0 });
    expect(report.orphanGroupsKilled).toBe(1);
    expect(await gone(sleeper.marker)).toBe(true);
    expect(await fsp.readdir(join(store, 'procs'))).toEqual([]);
    await s.close();
  });

  it('the reaper leaves the groups of a live engine alone', async () => {
    const store = join(await tempDir(), 'store');
    const sleeper = uniqueSleep();
    await startHost(store, 's', `echo started; ${sleeper.command}`);
    const s = await Store.open(store);
    expect(await reapOrphans(s)).toEqual({ killed: 0, journals: 0 });
    expect((await collectGarbage(s, { graceMs: 0 })).orphanGroupsKilled).toBe(0);
    expect(await pgrep(sleeper.marker)).toHaveLength(1);
    await s.close();
  });

  it('nothing proves a group named by an unstamped line, or in a journal without the boot id: it stays', async () => {
    const { store, dead, journal, fresh, started } = await stampedSetup();
    // Written now, after the group started, but without the stamp of the line that named it.
    await fsp.writeFile(journal('0aa'), `+${fresh}\n-1234567 ${uptimeTicks()}\n`);
    expect(await reapOrphans(store)).toEqual({ killed: 0, journals: 1 });
    expect(running(fresh)).toBe(true);
    // Stamped, in a journal whose name carries no boot id: its ticks may be of another boot.
    await fsp.writeFile(join(store.layout.procs, `${dead}-0bb.pgids`), `+${fresh} ${started}\n`);
    expect(await reapOrphans(store)).toEqual({ killed: 0, journals: 1 });
    expect(running(fresh)).toBe(true);
    // Untracked groups are not touched.
    await fsp.writeFile(journal('0cc'), `+${fresh} ${started}\n-${fresh} ${uptimeTicks()}\n`);
    expect(await reapOrphans(store)).toEqual({ killed: 0, journals: 1 });
    expect(running(fresh)).toBe(true);
    expect(await fsp.readdir(store.layout.procs)).toEqual([]);
    await store.close();
  });

  it('stamped journals are judged on the boot clock: never a group started after the last stamp, whatever the file times', async () => {
    const { store, dead, journal, fresh, started } = await stampedSetup();
    // Last stamped a tick before the group started, though the file was written just now: another group (a reused pid).
    await fsp.writeFile(journal('0aa'), `+${fresh} ${started - 1}\n`);
    expect(await reapOrphans(store)).toEqual({ killed: 0, journals: 1 });
    expect(running(fresh)).toBe(true);
    // Stamped after it started, though the file looks an hour old (a clock stepped): that group, and it goes.
    await fsp.writeFile(journal('0bb'), `+${fresh} ${started}\n-1234567 ${uptimeTicks()}\n`);
    const hourAgo = new Date(Date.now() - 60 * 60 * 1000);
    await fsp.utimes(journal('0bb'), hourAgo, hourAgo);
    expect(await reapOrphans(store)).toEqual({ killed: 1, journals: 1 });
    expect(await eventually(() => !running(fresh))).toBe(true);
    // A journal of another boot names nobody alive now: nothing is killed, the journal goes.
    const other = detachedSleep();
    await fsp.writeFile(
      join(store.layout.procs, `${dead}-t1b${bootOf() === '00000000' ? '11111111' : '00000000'}r0cc.pgids`),
      `+${other} ${uptimeTicks()}\n`,
    );
    expect(await reapOrphans(store)).toEqual({ killed: 0, journals: 1 });
    expect(running(other)).toBe(true);
    expect(await fsp.readdir(store.layout.procs)).toEqual([]);
    await store.close();
  });

  it("a group is judged by the stamp of the line that named it, not by later lines' stamps", async () => {
    const { store, journal, fresh, started } = await stampedSetup();
    // The journal's group of that id was named a tick before this one started (its pid reused since);
    // a later call's lines were stamped after, which says nothing of that group's being still there.
    await fsp.writeFile(journal('0aa'), `+${fresh} ${started - 1}\n+1234567 ${started}\n-1234567 ${uptimeTicks()}\n`);
    expect(await reapOrphans(store)).toEqual({ killed: 0, journals: 1 });
    expect(running(fresh)).toBe(true);
    // A new watchdog (the last one died) names every tracked group again: the first naming is what counts.
    await fsp.writeFile(journal('0bb'), `+${fresh} ${started - 1}\n+${fresh} ${uptimeTicks()}\n`);
    expect(await reapOrphans(store)).toEqual({ killed: 0, journals: 1 });
    expect(running(fresh)).toBe(true);
    // Untracked, then named again after it started: that group, and it goes.
    await fsp.writeFile(
      journal('0cc'),
      `+${fresh} ${started - 1}\n-${fresh} ${started - 1}\n+${fresh} ${started}\n-1234567 ${uptimeTicks()}\n`,
    );
    expect(await reapOrphans(store)).toEqual({ killed: 1, journals: 1 });
    expect(await eventually(() => !running(fresh))).toBe(true);
    expect(await fsp.readdir(store.layout.procs)).toEqual([]);
    await store.close();
  });

  it('a torn last line (a write cut short by a full disk) names no group', async () => {
    const { store, journal, fresh, started } = await stampedSetup();
    // `+<fresh>7 <ticks>` cut after the pid's digits: what is left names the live group `fresh`, which the
    // journal never tracked.
    await fsp.writeFile(journal('0aa'), `+1234567 ${started}\n-1234567 ${uptimeTicks()}\n+${fresh}`);
    expect(await reapOrphans(store)).toEqual({ killed: 0, journals: 1 });
    expect(running(fresh)).toBe(true);
    // The same line ended: tracked, and it goes.
    await fsp.writeFile(journal('0bb'), `+${fresh} ${started}\n`);
    expect(await reapOrphans(store)).toEqual({ killed: 1, journals: 1 });
    expect(await eventually(() => !running(fresh))).toBe(true);
    expect(await fsp.readdir(store.layout.procs)).toEqual([]);
    await store.close();
  });

  it('a watchdog that died while its engine lives is replaced, and the new one knows every tracked group', async () => {
    const dir = await tempDir();
    const guard = new ProcessGuard(join(dir, 'procs'));
    const a = detachedSleep();
    guard.track(a);
    const first = guard.watchdogPid as number;
    process.kill(first, 'SIGKILL');
    expect(await eventually(() => guard.watchdogPid === undefined)).toBe(true);
    const b = detachedSleep();
    guard.track(b);
    expect(guard.watchdogPid).not.toBe(first);
    // Closing the pipe is what the engine's death does: the new watchdog kills both groups.
    await guard.close();
    expect(await eventually(() => !running(a) && !running(b))).toBe(true);
    expect(await fsp.readdir(join(dir, 'procs'))).toEqual([]);
  });

  it('a watchdog started before its journal was known (as Engine.open starts it) journals from the first group and kills on end of file', async () => {
    const dir = await tempDir();
    const early = startWatchdog('');
    expect(early).toBeDefined();
    const guard = new ProcessGuard(join(dir, 'procs'), early);
    expect(guard.watchdogPid).toBe(early?.child.pid);
    // Nothing registered yet: no journal, not even its directory.
    await expect(fsp.readdir(join(dir, 'procs'))).rejects.toMatchObject({ code: 'ENOENT' });
    const a = detachedSleep();
    guard.track(a);
    expect(guard.watchdogPid).toBe(early?.child.pid);
    await journalsThenKills(dir, guard, a);
  });

  it('an early watchdog that died before its first group is replaced by one that journals', async () => {
    const dir = await tempDir();
    const early = startWatchdog('') as NonNullable<ReturnType<typeof startWatchdog>>;
    const guard = new ProcessGuard(join(dir, 'procs'), early);
    process.kill(early.child.pid as number, 'SIGKILL');
    await early.exited;
    expect(await eventually(() => guard.watchdogPid === undefined)).toBe(true);
    const a = detachedSleep();
    guard.track(a);
    expect(guard.watchdogPid).toBeDefined();
    expect(guard.watchdogPid).not.toBe(early.child.pid);
    await journalsThenKills(dir, guard, a);
  });

  it('a closed engine leaves no watchdog and no journal; one that never spawned wrote no journal', async () => {
    const { engine } = await openEngine();
    // Started by Engine.open, before any call.
    expect(await watchdogOf(process.pid)).toHaveLength(1);
    const r = await engine.run('bash', { command: 'echo hi' });
    expect(r.status).toBe('success');
    expect(await watchdogOf(process.pid)).toHaveLength(1);
    await engine.close();
    expect(await watchdogOf(process.pid)).toEqual([]);
    expect(await fsp.readdir(engine.store.layout.procs)).toEqual([]);
    const quiet = (await openEngine()).engine;
    expect((await quiet.read(quiet.options.cwd)).content).toBeDefined();
    await quiet.close();
    expect(await watchdogOf(process.pid)).toEqual([]);
    await expect(fsp.readdir(quiet.store.layout.procs)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
