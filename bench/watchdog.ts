/**
 * What the watchdog (engine/processes/process-guard.ts) costs per call, in
 * its own CPU: the real script under /bin/sh reads SLUICE_BENCH_CALLS pairs
 * of `+<pgid>` / `-<pgid>` lines, as the engine sends one pair per call,
 * once appending each line to a journal (stamping `+` lines from
 * /proc/uptime) and once without a journal, the baseline: reading and
 * tracking alone. CPU is the child's user + system time, from this
 * process's cutime/cstime in /proc/self/stat once the child is reaped.
 * Three rounds of each, alternating; medians. Target (docs/benchmarks.md,
 * "The watchdog"): the journal at most 4 times the baseline (measured: an
 * unstamped journal about 2.5 times, stamping `+` lines 2.6-3.4 times,
 * stamping every line 3.9 times; a process forked per line would be far
 * beyond).
 *
 *   SLUICE_BENCH_CALLS (default 20000)
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { WATCHDOG_NAME, WATCHDOG_SCRIPT } from '../engine/processes/process-guard.js';
import { passes, target } from './targets.js';
import { envInt, median, report, tempDir } from './util.js';

const CALLS = envInt('SLUICE_BENCH_CALLS', 20_000);
const ROUNDS = 3;
const TARGET_RATIO = 4;
/** Clock ticks per second of /proc times. */
const TICKS = 100;

/** CPU of this process's reaped children so far, in µs. */
function childrenCpuUs(): number {
  const stat = readFileSync('/proc/self/stat', 'latin1');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields 16 and 17 (cutime, cstime), counted from field 3 at index 0.
  return ((Number(f[13]) + Number(f[14])) * 1e6) / TICKS;
}

/** Group ids no process has (the lines untrack each at once, so nothing is killed at the end). */
function input(): Buffer {
  const parts: string[] = [];
  for (let i = 0; i < CALLS; i++) {
    const g = 999_000_000 + (i % 500);
    parts.push(`+${g}\n-${g}\n`);
  }
  return Buffer.from(parts.join(''));
}

async function run(lines: Buffer, journal: string): Promise<number> {
  const before = childrenCpuUs();
  const child = spawn('/bin/sh', ['-c', WATCHDOG_SCRIPT, WATCHDOG_NAME, String(process.pid), journal], {
    stdio: ['pipe', 'ignore', 'ignore'],
    env: { PATH: '/usr/bin:/bin', LC_ALL: 'C' },
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.stdin.end(lines);
  await exited;
  return (childrenCpuUs() - before) / CALLS;
}

const tmp = tempDir('sluice-bench-watchdog-');
try {
  const lines = input();
  const withJournal: number[] = [];
  const without: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    withJournal.push(await run(lines, join(tmp.dir, `r${r}.pgids`)));
    without.push(await run(lines, ''));
  }
  const journalUs = median(withJournal);
  const baseUs = median(without);
  const ratio = Math.round((journalUs / baseUs) * 100) / 100;
  const targets = [
    target(
      'watchdog.journal',
      `watchdog CPU per call with its journal ≤ ${TARGET_RATIO}× without`,
      ratio,
      '<=',
      TARGET_RATIO,
      'x',
    ),
  ];
  report({
    bench: 'watchdog',
    calls: CALLS,
    watchdogCpuUsPerCall: Math.round(journalUs * 10) / 10,
    noJournalCpuUsPerCall: Math.round(baseUs * 10) / 10,
    ratio,
    targets,
    pass: passes(targets),
  });
} finally {
  tmp.remove();
}
