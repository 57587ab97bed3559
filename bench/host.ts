/**
 * What the host did while a benchmark ran, so a reader can tell a slow
 * engine from a busy machine: the share of the CPUs the hypervisor stole
 * (`steal` in /proc/stat) and the share that processes other than the
 * benchmark used. The benchmark's own CPU is this process's plus that of
 * the children it has reaped (`cutime` + `cstime` in /proc/self/stat): the
 * benchmark process with its engine and worker threads, and what it spawned
 * itself. Counted as others, besides other processes: kernel threads (the
 * writeback of the benchmark's own files) and the engine's spawn helpers
 * with the tools they start, which are not the engine's children
 * (docs/operations.md, "The spawn helper"). Steal is the share no process
 * of this machine could have caused. A negative others share (this
 * process's own counters ahead of the machine's busy ticks) is reported as 0.
 *
 * Linux only; elsewhere {@link hostSample} returns undefined and nothing is
 * reported.
 */
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';

/** Cumulative CPU counters, in clock ticks. */
export interface HostSample {
  /** All ticks of all CPUs (idle included). */
  total: number;
  /** Ticks spent running anything (user, nice, system, irq, softirq). */
  busy: number;
  /** Ticks the hypervisor ran something else while a CPU wanted to run. */
  steal: number;
  /** Ticks of this process and of its reaped children. */
  mine: number;
  /** The 1-minute load average. */
  load1: number;
}

/** What happened between two samples, as percentages of all CPU time (2 cores: 100% = both). */
export interface HostShare {
  stealPct: number;
  /** CPU used by processes that are not the benchmark's. */
  othersPct: number;
  load1Start: number;
  load1End: number;
}

/** Reads the counters now; undefined where /proc is not there. */
export function hostSample(): HostSample | undefined {
  try {
    const cpu = (readFileSync('/proc/stat', 'latin1').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = cpu;
    const stat = readFileSync('/proc/self/stat', 'latin1');
    // Fields after the command name (which may hold spaces): utime is field 14, cstime 17.
    const f = stat
      .slice(stat.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    const mine = (f[11] ?? 0) + (f[12] ?? 0) + (f[13] ?? 0) + (f[14] ?? 0);
    const busy = user + nice + system + irq + softirq;
    return { total: busy + idle + iowait + steal, busy, steal, mine, load1: loadavg()[0] ?? 0 };
  } catch {
    return undefined;
  }
}

/** The share of the host between `a` and `b` (b later); undefined when either is missing. */
export function hostShare(a: HostSample | undefined, b: HostSample | undefined): HostShare | undefined {
  if (!a || !b || b.total <= a.total) return undefined;
  const total = b.total - a.total;
  const pct = (n: number) => Math.round((Math.max(0, n) / total) * 1000) / 10;
  return {
    stealPct: pct(b.steal - a.steal),
    othersPct: pct(b.busy - a.busy - (b.mine - a.mine)),
    load1Start: Math.round(a.load1 * 100) / 100,
    load1End: Math.round(b.load1 * 100) / 100,
  };
}
