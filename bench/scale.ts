/**
 * Harness scale (issue 21), every figure a ratio against a baseline measured
 * in the same run:
 *
 * - small: 200 small bash calls (`echo; seq 1 20; echo >&2`), 16 in flight,
 *   over 10 sessions, on a warm engine, against `child_process.spawn` of the
 *   same commands with the same concurrency (stdout and stderr read): wall
 *   <= 1.2x, p99 latency <= 1.5x. Rounds alternate; medians are quoted.
 * - cold: the same 200 calls from a fresh `node` process (engine open
 *   included) against a fresh `node` process spawning them: wall <= 2x.
 * - sleeps: 1,000 concurrent `sleep 5` bash calls through one engine: all
 *   succeed within 8 s, peak RSS of the process (its worker threads
 *   included) plus its spawn helpers' peak RSS <= 512 MiB. The same run
 *   without the spawn helper (`SLUICE_SPAWN_HELPER=0`) is printed beside it.
 *
 * "Warm" means in steady state: before the small rounds the engine and the
 * raw side each run SLUICE_BENCH_SCALE_WARMUP calls (the same number). V8's
 * compiler is still busy long after the first round: per small bash call its
 * platform threads (where TurboFan runs) took 0.9-1.75 ms of CPU over calls
 * 200-1000, ~0.9 ms at 2000 and ~0.7 ms at 2400, while the whole process
 * went from 5.2-5.9 ms to 3.4-3.8 ms (docs/benchmarks.md, "Warm-up"); a
 * warm-up of one round of 200 would measure the engine while it compiles
 * its call path.
 *
 *   SLUICE_BENCH_SCALE_ROUNDS (default 3), SLUICE_BENCH_SLEEPS (default 1000),
 *   SLUICE_BENCH_SCALE_WARMUP (default 2000, rounded up to whole rounds of 200)
 *
 * `node dist/bench/scale.js cold-engine DIR` and `cold-raw` are the cold
 * children (internal).
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine } from '../engine/engine.js';
import { isSpawnHelperOf } from '../workers/spawner.js';
import { passes, reportParts, target } from './targets.js';
import { envInt, inFlight, median, tempDir } from './util.js';

const CALLS = 200;
const IN_FLIGHT = 16;
const SESSIONS = 10;
const COMMAND = 'echo; seq 1 20; echo >&2';
const ROUNDS = envInt('SLUICE_BENCH_SCALE_ROUNDS', 3);
const SLEEPS = envInt('SLUICE_BENCH_SLEEPS', 1000);
const WARMUP_ROUNDS = Math.max(1, Math.ceil(envInt('SLUICE_BENCH_SCALE_WARMUP', 2000) / CALLS));

/** `n` jobs, `IN_FLIGHT` at a time: the wall ms and each job's latency. */
async function timed(n: number, one: (i: number) => Promise<void>): Promise<{ wallMs: number; latencies: number[] }> {
  const latencies: number[] = [];
  const wallMs = await inFlight(n, IN_FLIGHT, one, latencies);
  return { wallMs, latencies };
}

function p99(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(s.length * 0.99) - 1)] as number;
}

/** What the raw side does per call: spawn bash, read both pipes to the end. */
function rawCall(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', COMMAND], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', () => {});
    child.stderr.on('data', () => {});
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
  });
}

async function engineRound(engine: Engine, round: number) {
  return timed(CALLS, async (i) => {
    const r = await engine.run('bash', { command: COMMAND }, { session: `s${round}-${i % SESSIONS}` });
    if (r.status !== 'success') throw new Error(r.model);
  });
}

const r2 = (x: number) => Math.round(x * 100) / 100;

async function small(dir: string) {
  const engine = await Engine.open({ store: join(dir, 'store') });
  try {
    // Warm: threads up, code optimised (see the module comment); the raw side runs as many calls.
    for (let w = 1; w <= WARMUP_ROUNDS; w++) {
      await engineRound(engine, -w);
      await timed(CALLS, rawCall);
    }
    const rows: Array<{ engineMs: number; rawMs: number; engineP99: number; rawP99: number }> = [];
    for (let round = 0; round < ROUNDS; round++) {
      const raw = await timed(CALLS, rawCall);
      const eng = await engineRound(engine, round);
      rows.push({ engineMs: eng.wallMs, rawMs: raw.wallMs, engineP99: p99(eng.latencies), rawP99: p99(raw.latencies) });
    }
    const wall = median(rows.map((r) => r.engineMs / r.rawMs));
    const tail = median(rows.map((r) => r.engineP99 / r.rawP99));
    const targets = [
      target(
        'scale.small-wall',
        '200 small bash calls, 16 in flight, 10 sessions, warm engine: wall ≤ 1.2× raw spawn',
        wall,
        '<=',
        1.2,
        'x',
        2,
      ),
      target('scale.small-p99', "the same calls: p99 latency ≤ 1.5× raw spawn's p99", tail, '<=', 1.5, 'x', 2),
    ];
    return {
      warmupCalls: WARMUP_ROUNDS * CALLS,
      wallRatio: r2(wall),
      p99Ratio: r2(tail),
      rounds: rows.map((r) => ({
        engineMs: Math.round(r.engineMs),
        rawMs: Math.round(r.rawMs),
        engineP99Ms: r2(r.engineP99),
        rawP99Ms: r2(r.rawP99),
      })),
      pass: passes(targets),
      targets,
    };
  } finally {
    await engine.close();
  }
}

function child(mode: string, dir: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const c = spawn(process.execPath, [fileURLToPath(import.meta.url), mode, dir], { stdio: 'inherit' });
    c.on('error', reject);
    c.on('close', (code) => (code === 0 ? resolve(performance.now() - t0) : reject(new Error(`${mode} exit ${code}`))));
  });
}

async function cold(dir: string) {
  const rows: Array<{ engineMs: number; rawMs: number }> = [];
  for (let round = 0; round < ROUNDS; round++) {
    const rawMs = await child('cold-raw', dir);
    const engineMs = await child('cold-engine', join(dir, `cold-${round}`));
    rows.push({ engineMs, rawMs });
  }
  const ratio = median(rows.map((r) => r.engineMs / r.rawMs));
  const targets = [
    target(
      'scale.cold',
      'the same 200 calls from a fresh process, engine open included: wall ≤ 2× raw spawn from a fresh process',
      ratio,
      '<=',
      2,
      'x',
      2,
    ),
  ];
  return {
    wallRatio: r2(ratio),
    rounds: rows.map((r) => ({ engineMs: Math.round(r.engineMs), rawMs: Math.round(r.rawMs) })),
    pass: passes(targets),
    targets,
  };
}

/** The baseline: the same sleeps spawned straight from this process (before any engine exists). */
async function rawSleeps(): Promise<number> {
  const t0 = performance.now();
  await Promise.all(
    Array.from(
      { length: SLEEPS },
      () =>
        new Promise<void>((resolve, reject) => {
          const c = spawn('bash', ['-c', 'sleep 5'], { stdio: ['ignore', 'pipe', 'pipe'] });
          c.on('error', reject);
          c.on('close', () => resolve());
        }),
    ),
  );
  return performance.now() - t0;
}

/** The spawn helpers of this process (either kind, workers/spawner.ts) and the sum of their peak RSS (VmHWM). */
function spawnHelpersPeakRss(): { count: number; bytes: number; python: number } {
  let count = 0;
  let python = 0;
  let bytes = 0;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, 'latin1').replaceAll('\0', ' ');
      if (!isSpawnHelperOf(cmd, process.pid)) continue;
      if (cmd.includes('spawn-helper.py')) python++;
      const kb = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${name}/status`, 'latin1'))?.[1];
      count++;
      bytes += Number(kb ?? 0) * 1024;
    } catch {
      // Gone meanwhile.
    }
  }
  return { count, bytes, python };
}

/** One engine running SLEEPS concurrent `sleep 5` calls: wall time, failures, peak RSS (engine and helpers). */
async function engineSleeps(store: string) {
  // Only the width asked for: the threads carry it at their defaults, as they do for a user.
  const engine = await Engine.open({ store, concurrency: Math.min(SLEEPS, 1024) });
  try {
    let peak = process.memoryUsage.rss();
    const timer = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage.rss());
    }, 20);
    const t0 = performance.now();
    const results = await Promise.all(Array.from({ length: SLEEPS }, () => engine.run('bash', { command: 'sleep 5' })));
    const wallMs = performance.now() - t0;
    clearInterval(timer);
    peak = Math.max(peak, process.memoryUsage.rss());
    const helpers = spawnHelpersPeakRss();
    return {
      wallMs,
      failed: results.filter((r) => r.status !== 'success').length,
      engineMiB: Math.round(peak / 1024 / 1024),
      helpers,
      threads: engine.threads,
    };
  } finally {
    await engine.close();
  }
}

async function sleeps(dir: string) {
  const rawMs = await rawSleeps();
  // For comparison, in the same run: every spawn straight from the engine process (the worker
  // threads fork the whole engine), as without the spawn helper.
  process.env.SLUICE_SPAWN_HELPER = '0';
  const direct = await engineSleeps(join(dir, 'sleeps-direct')).finally(() => {
    delete process.env.SLUICE_SPAWN_HELPER;
  });
  const run = await engineSleeps(join(dir, 'sleeps'));
  // The spawn helpers are processes of their own: their memory counts against the bound too.
  const peakMiB = run.engineMiB + Math.round(run.helpers.bytes / 1024 / 1024);
  const targets = [
    target(
      'scale.sleeps-wall',
      `${SLEEPS} concurrent \`sleep 5\` bash calls: all done ≤ 8000 ms`,
      run.wallMs,
      '<=',
      8000,
      'ms',
      0,
    ),
    target(
      'scale.sleeps-rss',
      `${SLEEPS} concurrent \`sleep 5\`: peak RSS of the engine process + its spawn helpers ≤ 512 MiB`,
      peakMiB,
      '<=',
      512,
      'MiB',
    ),
    target(
      'scale.sleeps-failed',
      `${SLEEPS} concurrent \`sleep 5\`: no call fails, with and without the spawn helper`,
      run.failed + direct.failed,
      '<=',
      0,
      'calls',
    ),
  ];
  return {
    calls: SLEEPS,
    wallMs: Math.round(run.wallMs),
    rawSpawnMs: Math.round(rawMs),
    wallRatioToRaw: r2(run.wallMs / rawMs),
    withoutSpawnHelperMs: Math.round(direct.wallMs),
    peakRssMiB: peakMiB,
    engineProcessPeakRssMiB: run.engineMiB,
    spawnHelpers: run.helpers.count,
    pythonSpawnHelpers: run.helpers.python,
    threads: run.threads,
    failed: run.failed,
    pass: passes(targets),
    targets,
  };
}

const [mode, arg] = process.argv.slice(2);
if (mode === 'cold-raw') {
  await timed(CALLS, rawCall);
} else if (mode === 'cold-engine') {
  const engine = await Engine.open({ store: join(arg as string, 'store') });
  await engineRound(engine, 0);
  await engine.close();
} else {
  const tmp = tempDir('sluice-bench-scale-');
  try {
    const which = new Set(mode ? mode.split(',') : ['small', 'cold', 'sleeps']);
    await reportParts('scale', which, {
      small: () => small(tmp.dir),
      cold: () => cold(tmp.dir),
      sleeps: () => sleeps(tmp.dir),
    });
  } finally {
    tmp.remove();
  }
}
