/**
 * The orphan reaper: process groups of calls whose engine died and whose
 * watchdog died with it (both killed at once) still run. Each watchdog
 * journals the groups it tracks in `procs/<engine pid>-<token>.pgids`
 * (engine/processes/process-guard.ts); when the engine that owns a journal is dead (the
 * owner check of store/owners.ts, pid reuse included), every group
 * the journal still tracks is SIGKILLed and the journal removed. Engine.open
 * runs it in the background, and every garbage collection runs it.
 *
 * A group is killed only when it is provably the one the journal names: a
 * live, non-zombie process of that group started no later than the line
 * that named the group was written (a later line's stamp would not do: the
 * group may have ended and its id gone to another before the engine
 * untracked it). A group's id is the pid of its first leader and Linux does
 * not hand that pid out again while any member lives, so an old enough
 * member proves the group has existed since the journal named it. Both
 * times are boot-relative clock ticks: the watchdog stamps each line from
 * /proc/uptime, and /proc/<pid>/stat gives start times on the same clock,
 * so no wall clock is read and a clock stepped back cannot make a new group
 * look old. A journal of another boot (its name carries the boot's id)
 * names no process now alive: nothing is killed. A group named by an
 * unstamped line, or in a journal whose name carries no boot id, has
 * nothing to prove it by: it is not killed. What is left: the pid
 * handed out again between the call's spawn and the stamp of its line
 * (`pid_max` forks, 32,768 or more, in that moment), or a process that
 * started by then and later joined a new group of the same id (setpgid,
 * within its own session). Without /proc nothing is killed.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { readRegularFile } from '../../store/owned-files.js';
import { bootId, OwnerCheck, ownerPid, ownerToken, procInfo } from '../../store/owners.js';
import type { Store } from '../../store/store.js';
import { killProcessGroup } from './process-group.js';

/** A group a journal still tracks, and by when (ticks since boot) the journal had named it, if its line was stamped. */
export interface TrackedGroup {
  pgid: number;
  ticks: number | undefined;
}

/**
 * The groups a journal still tracks (their last line is `+<pgid>`), each
 * with the stamp of the line that first named it since it was last
 * untracked: the group existed then. A later line's stamp says nothing of
 * that group (it may have ended and its id gone to another before the
 * engine untracked it), and a `+` line repeated by a new watchdog (the
 * last one died) names a group already tracked. A last line without its
 * newline is not read.
 */
export function readJournal(text: string): TrackedGroup[] {
  const tracked = new Map<number, TrackedGroup>();
  // What follows the last newline is no line: a write cut short (a full disk), whose digits may be the first
  // few of another group's id.
  const lines = text.split('\n');
  lines.pop();
  for (const line of lines) {
    const m = /^([+-])([1-9][0-9]{0,9})(?: ([0-9]{1,15}))?$/.exec(line);
    if (!m) continue;
    const pgid = Number(m[2]);
    const ticks = m[3] === undefined ? undefined : Number(m[3]);
    if (m[1] === '-') tracked.delete(pgid);
    else if (!tracked.has(pgid)) tracked.set(pgid, { pgid, ticks });
  }
  return [...tracked.values()];
}

function startedBy(p: NonNullable<ReturnType<typeof procInfo>>, ticks: number): boolean {
  return Number(p.startTicks) <= ticks;
}

/** True when group `pgid` has a live member that started by `ticks` since boot. */
function groupStillThere(pgid: number, ticks: number): boolean {
  const leader = procInfo(pgid);
  if (leader && !leader.zombie && leader.pgrp === pgid) return startedBy(leader, ticks);
  // The leader is gone (or is another process now): look for members.
  let pids: string[];
  try {
    pids = readdirSync('/proc');
  } catch {
    return false;
  }
  for (const name of pids) {
    if (!/^[0-9]+$/.test(name)) continue;
    const p = procInfo(Number(name));
    if (p && !p.zombie && p.pgrp === pgid && startedBy(p, ticks)) return true;
  }
  return false;
}

/** What a reaping pass did. */
export interface ReapReport {
  /** Process groups killed. */
  killed: number;
  /** Journals of dead engines removed. */
  journals: number;
}

/**
 * Kills the groups that journals of dead engines still track and removes
 * those journals. Journals of live engines, and names not of the owned form,
 * are left alone. Errors reading one journal leave it for the next pass.
 */
export async function reapOrphans(store: Store): Promise<ReapReport> {
  const report: ReapReport = { killed: 0, journals: 0 };
  let names: string[];
  try {
    names = await store.io.readdir(store.layout.procs);
  } catch {
    return report;
  }
  const owners = new OwnerCheck();
  for (const name of names) {
    const pid = ownerPid(name);
    if (pid === undefined || !name.endsWith('.pgids')) continue;
    const path = join(store.layout.procs, name);
    let read: Awaited<ReturnType<typeof readRegularFile>>;
    try {
      read = await readRegularFile(store.io, path);
    } catch {
      continue;
    }
    if (!read || owners.alive(pid, read.mtimeMs, name)) continue;
    const token = ownerToken(name);
    const boot = bootId();
    // Another boot's processes are all gone (the pids its journal names belong to others now), and a
    // journal without the boot's id cannot be placed on this boot's clock.
    const onBootClock = token !== undefined && boot !== null && token.boot === boot;
    for (const g of onBootClock ? readJournal(read.text) : []) {
      if (g.ticks === undefined || !groupStillThere(g.pgid, g.ticks)) continue;
      killProcessGroup(g.pgid);
      report.killed++;
    }
    await store.io.unlink(path).then(
      () => report.journals++,
      () => {},
    );
  }
  return report;
}
