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
 * journal's last change (plus the owner check's slack). A group's id is the
 * pid of its first leader and Linux does not hand that pid out again while
 * any member lives, so an old enough member proves the group has existed
 * since the journal named it. Without /proc nothing is killed.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { readRegularFile } from '../../store/owned-files.js';
import { OwnerCheck, ownerPid, procInfo, START_SLACK_MS } from '../../store/owners.js';
import type { Store } from '../../store/store.js';
import { killProcessGroup } from './process-group.js';

/** The groups a journal still tracks: those whose last line is `+<pgid>`. */
export function trackedGroups(text: string): number[] {
  const last = new Map<number, boolean>();
  for (const line of text.split('\n')) {
    const m = /^([+-])([1-9][0-9]{0,9})$/.exec(line);
    if (m) last.set(Number(m[2]), m[1] === '+');
  }
  return [...last].filter(([, on]) => on).map(([g]) => g);
}

/** True when group `pgid` has a live member that started by `bySeenMs`. */
function groupStillThere(pgid: number, bySeenMs: number): boolean {
  const leader = procInfo(pgid);
  if (leader && !leader.zombie && leader.pgrp === pgid) return leader.startMs <= bySeenMs;
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
    if (p && !p.zombie && p.pgrp === pgid && p.startMs <= bySeenMs) return true;
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
    for (const g of trackedGroups(read.text)) {
      if (!groupStillThere(g, read.mtimeMs + START_SLACK_MS)) continue;
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
