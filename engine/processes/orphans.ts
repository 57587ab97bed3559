/**
 * The orphan reaper: process groups of calls whose engine died and whose
 * watchdog died with it (both killed at once) still run. Each watchdog
 * journals the groups it tracks in `procs/<engine pid>-<random>.pgids`
 * (engine/processes/process-guard.ts); when the engine that owns a journal is dead (the
 * owner check of store/owners.ts, pid reuse included), every group
 * the journal still tracks is SIGKILLed and the journal removed. Engine.open
 * runs it in the background, and every garbage collection runs it.
 *
 * A group is killed only when it is provably the one the journal names: a
 * live, non-zombie process of that group started no later than the
 * journal's last line was written. A group's id is the pid of its first
 * leader and Linux does not hand that pid out again while any member lives,
 * so an old enough member proves the group has existed since the journal
 * named it. Both times are boot-relative clock ticks: the watchdog stamps
 * each line from /proc/uptime, and /proc/<pid>/stat gives start times on
 * the same clock, so no wall clock is read and a clock stepped back cannot
 * make a new group look old. A journal of another boot (its name carries
 * the boot's id) names no process now alive: nothing is killed. What is
 * left is one tick (10 ms): a group whose pid was reused within the tick of
 * the journal's last line; the pid must have been handed out
 * `pid_max` times over (32,768 or more forks) in that tick. Journals
 * without stamps or token (older versions, no /proc) keep the earlier rule,
 * the journal's mtime plus the owner check's slack. Without /proc nothing
 * is killed.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { readRegularFile } from '../../store/owned-files.js';
import { bootId, OwnerCheck, ownerPid, ownerToken, procInfo, START_SLACK_MS } from '../../store/owners.js';
import type { Store } from '../../store/store.js';
import { killProcessGroup } from './process-group.js';

/** What a journal says: the groups it still tracks (last line `+<pgid>`) and its latest stamp, if any. */
export function readJournal(text: string): { groups: number[]; lastTicks: number | undefined } {
  const last = new Map<number, boolean>();
  let lastTicks: number | undefined;
  for (const line of text.split('\n')) {
    const m = /^([+-])([1-9][0-9]{0,9})(?: ([0-9]{1,15}))?$/.exec(line);
    if (!m) continue;
    last.set(Number(m[2]), m[1] === '+');
    if (m[3] !== undefined) lastTicks = Math.max(lastTicks ?? 0, Number(m[3]));
  }
  return { groups: [...last].filter(([, on]) => on).map(([g]) => g), lastTicks };
}

/** How old a member must be to prove its group is the journal's: started by this tick since boot, or this wall time. */
type StartBound = { ticks: number } | { ms: number };

function startedBy(p: NonNullable<ReturnType<typeof procInfo>>, bound: StartBound): boolean {
  return 'ticks' in bound ? Number(p.startTicks) <= bound.ticks : p.startMs <= bound.ms;
}

/** True when group `pgid` has a live member that started by `bound`. */
function groupStillThere(pgid: number, bound: StartBound): boolean {
  const leader = procInfo(pgid);
  if (leader && !leader.zombie && leader.pgrp === pgid) return startedBy(leader, bound);
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
    if (p && !p.zombie && p.pgrp === pgid && startedBy(p, bound)) return true;
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
    const { groups, lastTicks } = readJournal(read.text);
    const token = ownerToken(name);
    const boot = bootId();
    // Another boot's processes are all gone; the pids its journal names belong to others now.
    const otherBoot = token !== undefined && boot !== null && token.boot !== boot;
    const bound: StartBound =
      token !== undefined && boot !== null && lastTicks !== undefined
        ? { ticks: lastTicks }
        : { ms: read.mtimeMs + START_SLACK_MS };
    for (const g of otherBoot ? [] : groups) {
      if (!groupStillThere(g, bound)) continue;
      killProcessGroup(g);
      report.killed++;
    }
    await store.io.unlink(path).then(
      () => report.journals++,
      () => {},
    );
  }
  return report;
}
