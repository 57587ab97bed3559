/**
 * Per-call overhead: a no-op JS tool writing 100 bytes of single
 * output, published and recorded in a session, 16 calls in flight, against
 * bare piscina no-op tasks with the same concurrency in the same run.
 *
 * Beside the figure it prints where the CPU goes (`attribution`), medians of
 * the same three rounds: the whole process's CPU time per call (all threads:
 * main, workers, libuv, V8's) and the main thread's, for the full call, the
 * same call without a session, and a call that writes nothing and has no
 * session (its empty output is still pinned and its empty blob refreshed);
 * the CPU of the system calls that publish one small file durably, made
 * synchronously with nothing around them; and the budget, the CPU per call
 * that the machine's cores allow at the target rate (3000 calls/s). `silentNoSession +
 * durableFile` approximates a floor for a call that publishes its output as
 * a file of its own with today's call machinery, before recording it
 * (docs/benchmarks.md, "Per-call overhead").
 *
 * Both sides are measured in steady state, after SLUICE_BENCH_WARMUP calls
 * (the same number for the bare piscina baseline): each engine starts its
 * own workers, and every isolate compiles the call path for itself. The
 * default is where V8's compiler settles, measured per 1000 recorded calls
 * as the CPU time of the process's four V8 platform threads (where TurboFan
 * runs; docs/benchmarks.md, "Warm-up"): ~250-320 µs
 * per call in the first 2000 calls, 75-100 by 6000, 30-70 from 8000 to
 * 10,000 and 20-45 past 12,000 (what is left is mostly concurrent GC
 * marking). After 2000 warm-up calls the measured calls would still pay
 * for the compiler: a third of their CPU.
 *
 *   SLUICE_BENCH_CALLS (default 5000), SLUICE_BENCH_WARMUP (default 8000)
 *
 * Run with --expose-gc (`npm run bench` does) for the collection before each
 * measurement.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import { Engine } from '../engine/engine.js';
import { distPath } from '../engine/pool/dist-paths.js';
import { passes, target } from './targets.js';
import { envInt, inFlight, median, report, tempDir } from './util.js';

const CALLS = envInt('SLUICE_BENCH_CALLS', 5000);
const IN_FLIGHT = 16;
const WARMUP = envInt('SLUICE_BENCH_WARMUP', 8000);
/** No-op calls published and recorded, 16 in flight: at least 3,000 per second. */
const TARGET_PER_SEC = 3000;

/** What one measured run gives: calls per second, and CPU µs per call of the process and of its main thread. */
interface Measured {
  perSec: number;
  cpuUs: number;
  /** Undefined where the thread's CPU time cannot be read (not Linux). */
  mainUs: number | undefined;
}

/**
 * On-CPU µs of the main thread so far, from Linux's per-thread schedstat
 * (`process.cpuUsage` sums every thread; the main thread is the one that
 * cannot be spread over more cores).
 */
function mainThreadMicros(): number | undefined {
  try {
    // thread-self: this code runs on the main thread, and a pid namespace may hide process.pid's entry.
    const ns = Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]);
    return Number.isFinite(ns) ? ns / 1000 : undefined;
  } catch {
    return undefined;
  }
}

/** `n` calls, 16 in flight, measured after a collection so no earlier run's garbage is charged to this one. */
async function measured(n: number, one: (i: number) => Promise<void>): Promise<Measured> {
  (globalThis as { gc?: () => void }).gc?.();
  const main0 = mainThreadMicros();
  const cpu0 = process.cpuUsage();
  const ms = await inFlight(n, IN_FLIGHT, one);
  const cpu = process.cpuUsage(cpu0);
  const main1 = mainThreadMicros();
  return {
    perSec: n / (ms / 1000),
    cpuUs: (cpu.user + cpu.system) / n,
    mainUs: main0 === undefined || main1 === undefined ? undefined : (main1 - main0) / n,
  };
}

async function bare(): Promise<Measured> {
  const pool = new Piscina({ filename: distPath('bench/overhead-worker.js'), minThreads: 2, maxThreads: IN_FLIGHT });
  try {
    await inFlight(WARMUP, IN_FLIGHT, async (i) => void (await pool.run(i)));
    return await measured(CALLS, async (i) => void (await pool.run(i)));
  } finally {
    await pool.destroy();
  }
}

/** What the calls of one engine do: the benchmark's call, or a lighter one for the attribution. */
interface Variant {
  name: 'full' | 'noSession' | 'silentNoSession';
  /** `noop` writes 100 bytes; `silent` writes nothing. */
  tool: 'noop' | 'silent';
  /** Recorded in a session. */
  session: boolean;
}

const VARIANTS: readonly Variant[] = [
  { name: 'full', tool: 'noop', session: true },
  { name: 'noSession', tool: 'noop', session: false },
  { name: 'silentNoSession', tool: 'silent', session: false },
];

async function sluice(dir: string, v: Variant): Promise<Measured & { failed: number }> {
  const engine = await Engine.open({ store: dir, concurrency: IN_FLIGHT, minThreads: 2 });
  try {
    await engine.register(distPath(`bench/tools/${v.tool}.js`));
    let failed = 0;
    const options = v.session ? { session: 'bench' } : {};
    const one = async (i: number) => {
      const r = await engine.run(v.tool, { i }, options);
      if (r.status !== 'success') failed++;
    };
    await inFlight(WARMUP, IN_FLIGHT, one);
    const r = await measured(CALLS, (i) => one(i + 1_000_000));
    return { ...r, failed };
  } finally {
    await engine.close();
  }
}

/**
 * Kernel cost of creating one empty file where the stores live, in µs: every
 * published call creates at least its blob file. On ext4 this is ~40 µs, but
 * ~1 ms in a block group where many inodes were deleted in the last few
 * minutes (docs/benchmarks.md, "Inode churn"), so it is reported beside the
 * figure. The probe files stay until the directory is removed: deleting them
 * here would slow the stores' own file creation.
 */
function inodeCreateMicros(dir: string): number {
  mkdirSync(`${dir}/probe`);
  const t0 = process.cpuUsage();
  for (let i = 0; i < 64; i++) closeSync(openSync(`${dir}/probe/${i}`, 'wx'));
  const used = process.cpuUsage(t0);
  return Math.round((used.user + used.system) / 64);
}

/** CPU µs of one durable small-file publication's system calls, and of its two fsyncs. */
interface DurableFile {
  total: number;
  fsyncFile: number;
  fsyncDir: number;
}

/**
 * CPU µs (user + system) of publishing one 100-byte file durably here, with
 * synchronous calls and nothing else: create, write, fsync, close, rename,
 * fsync of the directory. Also the two fsyncs on their own: on a virtual disk
 * each is a cache flush the guest kernel pays for.
 */
function durableFileMicros(dir: string): DurableFile {
  const n = 200;
  mkdirSync(`${dir}/tmp`, { recursive: true });
  mkdirSync(`${dir}/blobs`);
  const bytes = Buffer.alloc(100, 0x78);
  const cpu = () => {
    const u = process.cpuUsage();
    return u.user + u.system;
  };
  let total = 0;
  let file = 0;
  let directory = 0;
  const dirFd = openSync(`${dir}/blobs`, 'r');
  try {
    for (let i = 0; i < n; i++) {
      const path = `${dir}/tmp/${i}`;
      const t0 = cpu();
      const fd = openSync(path, 'wx');
      let t1: number;
      let t2: number;
      try {
        writeSync(fd, bytes);
        t1 = cpu();
        fsyncSync(fd);
        t2 = cpu();
      } finally {
        closeSync(fd);
      }
      renameSync(path, `${dir}/blobs/${i}`);
      const t3 = cpu();
      fsyncSync(dirFd);
      const t4 = cpu();
      total += t4 - t0;
      file += t2 - t1;
      directory += t4 - t3;
    }
  } finally {
    closeSync(dirFd);
  }
  return { total: total / n, fsyncFile: file / n, fsyncDir: directory / n };
}

const round = (x: number | undefined) => (x === undefined ? null : Math.round(x));

function medianOf(runs: readonly Measured[]): Measured {
  if (runs.length === 0) throw new Error('no runs to take a median of');
  const main = runs.map((r) => r.mainUs);
  return {
    perSec: median(runs.map((r) => r.perSec)),
    cpuUs: median(runs.map((r) => r.cpuUs)),
    mainUs: main.every((m): m is number => m !== undefined) ? median(main) : undefined,
  };
}

const tmp = tempDir('sluice-bench-overhead-');
try {
  const inodeCreateUs = inodeCreateMicros(tmp.dir);
  const bareRuns: Measured[] = [];
  const durableRuns: DurableFile[] = [];
  // Every variant runs in every round, in a rotating order, so each median sees the same moments of the
  // machine and each variant runs once in each position.
  const runs = Object.fromEntries(VARIANTS.map((v) => [v.name, [] as Measured[]])) as Record<
    Variant['name'],
    Measured[]
  >;
  const failed = Object.fromEntries(VARIANTS.map((v) => [v.name, 0])) as Record<Variant['name'], number>;
  for (let i = 0; i < 3; i++) {
    bareRuns.push(await bare());
    durableRuns.push(durableFileMicros(`${tmp.dir}/durable-${i}`));
    for (let k = 0; k < VARIANTS.length; k++) {
      const v = VARIANTS[(i + k) % VARIANTS.length] as Variant;
      const r = await sluice(`${tmp.dir}/store-${v.name}-${i}`, v);
      runs[v.name].push(r);
      failed[v.name] += r.failed;
    }
  }
  const full = medianOf(runs.full);
  const noSession = medianOf(runs.noSession);
  const silent = medianOf(runs.silentNoSession);
  const b = medianOf(bareRuns);
  const durable = {
    total: median(durableRuns.map((d) => d.total)),
    fsyncFile: median(durableRuns.map((d) => d.fsyncFile)),
    fsyncDir: median(durableRuns.map((d) => d.fsyncDir)),
  };
  const fullFailed = failed.full;
  const targets = [
    target(
      'overhead.rate',
      `no-op JS calls, published and recorded, ${IN_FLIGHT} in flight ≥ ${TARGET_PER_SEC} calls/s`,
      full.perSec,
      '>=',
      TARGET_PER_SEC,
      'calls/s',
      0,
    ),
    target('overhead.failed', 'no measured call fails', fullFailed, '<=', 0, 'calls'),
  ];
  report({
    bench: 'overhead',
    calls: CALLS,
    warmup: WARMUP,
    inFlight: IN_FLIGHT,
    sluiceCallsPerSec: round(full.perSec),
    barePiscinaTasksPerSec: round(b.perSec),
    ratioToBare: Math.round((full.perSec / b.perSec) * 1000) / 1000,
    failed: fullFailed,
    storeDir: tmp.dir,
    inodeCreateUs,
    attribution: {
      budgetCpuUsPerCall: round((availableParallelism() * 1e6) / TARGET_PER_SEC),
      cpuUsPerCall: {
        full: round(full.cpuUs),
        noSession: round(noSession.cpuUs),
        silentNoSession: round(silent.cpuUs),
        barePiscinaTask: round(b.cpuUs),
      },
      mainThreadUsPerCall: {
        full: round(full.mainUs),
        noSession: round(noSession.mainUs),
        silentNoSession: round(silent.mainUs),
        barePiscinaTask: round(b.mainUs),
      },
      // Seconds of main-thread CPU per second that the target's rate would take at today's cost per call.
      mainThreadAtTarget: full.mainUs === undefined ? null : Math.round((full.mainUs * TARGET_PER_SEC) / 1e4) / 100,
      callsPerSec: { noSession: round(noSession.perSec), silentNoSession: round(silent.perSec) },
      durableFileCpuUs: {
        total: round(durable.total),
        fsyncFile: round(durable.fsyncFile),
        fsyncDir: round(durable.fsyncDir),
      },
      floorCpuUsPerCall: round(silent.cpuUs + durable.total),
      failed,
    },
    targets,
    pass: passes(targets),
  });
} finally {
  tmp.remove();
}
