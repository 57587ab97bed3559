/**
 * The orphan reaper: process groups of calls whose engine and watchdog died
 * together still run. When the engine owning a journal is dead (the owner
 * check of store/owners.ts), every group its journal still tracks is
 * SIGKILLed and the journal removed; Engine.open runs it in the background
 * and every collection runs it.
 *
 * A group is killed only when provably the journal's: a live member started
 * no later than the stamp of the line that named it. Linux does not reuse a
 * group's id while any member lives, and both times are boot-clock ticks
 * (/proc/uptime, /proc/<pid>/stat), so no wall clock takes part. Nothing
 * proves a group of another boot, of an unstamped line or of a journal
 * without a boot id: it is not killed (docs/operations.md, "The orphan reaper").
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
 * The groups a journal still tracks, each with the stamp of the line that
 * first named it since it was last untracked: a later line's stamp says
 * nothing of that group, and a `+` repeated by a new watchdog names a group
 * already tracked. A last line without its newline is not read.
 */
export function readJournal(text: string): TrackedGroup[] {
  const tracked = new Map<number, TrackedGroup>();
  // A write cut short (a full disk) is no line: its digits may be the first few of another group's id.
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
  killed: number;
  journals: number;
}

/** Kills the groups that dead engines' journals still track and removes those journals; a journal that cannot be read waits for the next pass. */
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
    // Another boot's pids belong to others now; a journal without the boot's id has no clock to judge by.
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
