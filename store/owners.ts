/**
 * Who owns a file in tmp/ or pins/, and whether that owner lives. Names are
 * `<pid>-t<start ticks>b<boot id>r<random>.<kind>`: the owner is alive
 * exactly when that pid runs, not a zombie, with that start in that boot, so
 * no wall clock is consulted and a stepped clock cannot make it look dead.
 * A name without the token (where /proc could not be read) falls back to
 * `kill(pid, 0)` (EPERM is alive) and, against pid reuse, a process started
 * over {@link START_SLACK_MS} after the file's mtime is not its owner; where
 * that cannot be read the file is kept. One pid namespace per store.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc times (USER_HZ, 100 on every mainstream Linux). */
const CLOCK_TICKS = 100;
/** Boot time in /proc/stat has one-second resolution; start times closer than this to the file's mtime are not judged. */
const START_SLACK_MS = 2000;

const OWNED = /^([1-9][0-9]{0,9})-[0-9a-zA-Z]+\.[a-z]+$/;

/** The owner pid encoded in an owned file's name, or undefined when the name is not of that form. */
export function ownerPid(name: string): number | undefined {
  const m = OWNED.exec(name);
  return m ? Number(m[1]) : undefined;
}

const TOKEN = /^[1-9][0-9]{0,9}-t([0-9]{1,20})b([0-9a-f]{8})r/;

let bootIdCache: string | null | undefined;

/** The first 8 hex digits of this boot's id (as owned names carry it), or null without /proc. */
export function bootId(): string | null {
  if (bootIdCache === undefined) {
    try {
      const id = readFileSync('/proc/sys/kernel/random/boot_id', 'latin1').replace(/[^0-9a-f]/g, '');
      bootIdCache = id.length >= 8 ? id.slice(0, 8) : null;
    } catch {
      bootIdCache = null;
    }
  }
  return bootIdCache;
}

let selfToken: string | undefined;

/** `<pid>-<token>` with `randomHex` random digits; append the suffix. */
export function ownedName(randomHex = 12): string {
  if (selfToken === undefined) {
    const ticks = startTicks(process.pid);
    const boot = bootId();
    selfToken = ticks !== undefined && boot !== null ? `t${ticks}b${boot}r` : '';
  }
  return `${process.pid}-${selfToken}${randomBytes(Math.ceil(randomHex / 2))
    .toString('hex')
    .slice(0, randomHex)}`;
}

/** The start (clock ticks since boot) and boot id an owned name carries, if any. */
export function ownerToken(name: string): { ticks: string; boot: string } | undefined {
  const m = TOKEN.exec(name);
  return m ? { ticks: m[1] as string, boot: m[2] as string } : undefined;
}

/** Field 22 of /proc/<pid>/stat: the process's start in clock ticks since boot, as text (it can pass 2^53). */
function startTicks(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const ticks = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    return ticks && /^[0-9]+$/.test(ticks) ? ticks : undefined;
  } catch {
    return undefined;
  }
}

let bootTimeMs: number | null | undefined;

function bootTime(): number | null {
  if (bootTimeMs === undefined) {
    try {
      const m = /^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'latin1'));
      bootTimeMs = m ? Number(m[1]) * 1000 : null;
    } catch {
      bootTimeMs = null;
    }
  }
  return bootTimeMs;
}

/** What /proc says about a process: its start (ms since the epoch), its process group, and whether it is a zombie. */
export function procInfo(
  pid: number,
): { startMs: number; startTicks: string; zombie: boolean; pgrp: number } | undefined {
  const boot = bootTime();
  if (boot === null) return undefined;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  // comm (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const state = rest[0];
  const ticks = Number(rest[19]);
  if (!Number.isFinite(ticks)) return undefined;
  return {
    startMs: boot + (ticks * 1000) / CLOCK_TICKS,
    startTicks: rest[19] as string,
    zombie: state === 'Z' || state === 'X',
    pgrp: Number(rest[2]),
  };
}

/** Liveness answers for one GC pass: a process found alive or dead stays so for the pass. */
export class OwnerCheck {
  private readonly procs = new Map<number, { exists: boolean; info: ReturnType<typeof procInfo> }>();

  /** This process is always alive; a token in `name` decides without any timestamp. */
  alive(pid: number, fileMtimeMs: number, name?: string): boolean {
    if (pid === process.pid) return true;
    let p = this.procs.get(pid);
    if (!p) {
      let exists = true;
      try {
        process.kill(pid, 0);
      } catch (err) {
        exists = (err as { code?: unknown }).code === 'EPERM';
      }
      p = { exists, info: exists ? procInfo(pid) : undefined };
      this.procs.set(pid, p);
    }
    if (!p.exists || p.info?.zombie) return false;
    const token = name === undefined ? undefined : ownerToken(name);
    const boot = bootId();
    if (token && p.info && boot !== null) {
      // The same pid in another boot, or started at another tick, is another process.
      return token.boot === boot && token.ticks === p.info.startTicks;
    }
    // A process that started after the file was last written did not write it: the pid was reused.
    if (p.info && p.info.startMs > fileMtimeMs + START_SLACK_MS) return false;
    return true;
  }
}
