/**
 * Per-call overhead (target 3): a no-op JS tool writing 100 bytes of single
 * output, published and recorded in a session, 16 calls in flight, against
 * bare piscina no-op tasks with the same concurrency in the same run.
 *
 * Beside the figure it prints where the CPU goes (`attribution`): the whole
 * process's CPU time per call (all threads: main, workers, libuv, V8's) for
 * the full call, the same call without a session, and a call that writes
 * nothing and has no session (nothing published); the CPU of the system calls
 * that publish one small file durably, made synchronously with nothing
 * around them; and the budget, the CPU per call that the machine's cores
 * allow at 1500 calls/s. `silentNoSession + durableFile` is a floor for any
 * call that publishes its output as a file of its own with today's call
 * machinery, before recording it (docs/benchmarks.md).
 *
 * Both sides are measured in steady state, after SLUICE_BENCH_WARMUP calls:
 * each engine starts its own 16 workers, and with only a few calls each
 * their code is still unoptimised (200 warm-up calls gave ~25% fewer calls
 * per second than 2000 on the same build).
 *
 *   SLUICE_BENCH_CALLS (default 5000), SLUICE_BENCH_WARMUP (default 2000)
 */
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, writeSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import { Engine } from '../engine/engine.js';
import { distPath } from '../engine/paths.js';
import { envInt, median, report, tempDir } from './util.js';

const CALLS = envInt('SLUICE_BENCH_CALLS', 5000);
const IN_FLIGHT = 16;
const WARMUP = envInt('SLUICE_BENCH_WARMUP', 2000);

async function inFlight(n: number, one: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < n) await one(next++);
    }),
  );
  return performance.now() - t0;
}

/** Calls per second and CPU µs per call (whole process) of `n` calls, 16 in flight. */
async function measured(n: number, one: (i: number) => Promise<void>): Promise<{ perSec: number; cpuUs: number }> {
  const cpu0 = process.cpuUsage();
  const ms = await inFlight(n, one);
  const cpu = process.cpuUsage(cpu0);
  return { perSec: n / (ms / 1000), cpuUs: (cpu.user + cpu.system) / n };
}

async function bare(): Promise<{ perSec: number; cpuUs: number }> {
  const pool = new Piscina({ filename: distPath('bench/overhead-worker.js'), minThreads: 2, maxThreads: IN_FLIGHT });
  await inFlight(WARMUP, async (i) => void (await pool.run(i)));
  const r = await measured(CALLS, async (i) => void (await pool.run(i)));
  await pool.destroy();
  return r;
}

/** What the calls of one engine do: the benchmark's call, or a lighter one for the attribution. */
interface Variant {
  /** `noop` writes 100 bytes; `silent` writes nothing. */
  tool: 'noop' | 'silent';
  /** Recorded in a session. */
  session: boolean;
}

async function sluice(dir: string, v: Variant): Promise<{ perSec: number; cpuUs: number; failed: number }> {
  const engine = await Engine.open({ store: dir, concurrency: IN_FLIGHT, minThreads: 2 });
  await engine.register(distPath(`bench/tools/${v.tool}.js`));
  let failed = 0;
  const options = v.session ? { session: 'bench' } : {};
  const one = async (i: number) => {
    const r = await engine.run(v.tool, { i }, options);
    if (r.status !== 'success') failed++;
  };
  await inFlight(WARMUP, one);
  const r = await measured(CALLS, (i) => one(i + 1_000_000));
  await engine.close();
  return { ...r, failed };
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

/**
 * CPU µs (user + system) of publishing one 100-byte file durably here, with
 * synchronous calls and nothing else: create, write, fsync, close, rename,
 * fsync of the directory. Also the two fsyncs on their own: on a virtual disk
 * each is a cache flush the guest kernel pays for.
 */
function durableFileMicros(dir: string): { total: number; fsyncFile: number; fsyncDir: number } {
  const n = 200;
  mkdirSync(`${dir}/durable/tmp`, { recursive: true });
  mkdirSync(`${dir}/durable/blobs`);
  const bytes = Buffer.alloc(100, 0x78);
  const cpu = () => {
    const u = process.cpuUsage();
    return u.user + u.system;
  };
  let total = 0;
  let file = 0;
  let directory = 0;
  const dirFd = openSync(`${dir}/durable/blobs`, 'r');
  try {
    for (let i = 0; i < n; i++) {
      const path = `${dir}/durable/tmp/${i}`;
      const t0 = cpu();
      const fd = openSync(path, 'wx');
      writeSync(fd, bytes);
      const t1 = cpu();
      fsyncSync(fd);
      const t2 = cpu();
      closeSync(fd);
      renameSync(path, `${dir}/durable/blobs/${i}`);
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
  return { total: Math.round(total / n), fsyncFile: Math.round(file / n), fsyncDir: Math.round(directory / n) };
}

const tmp = tempDir('sluice-bench-overhead-');
try {
  const inodeCreateUs = inodeCreateMicros(tmp.dir);
  const durableFileCpuUs = durableFileMicros(tmp.dir);
  const bareRuns: Array<{ perSec: number; cpuUs: number }> = [];
  const sluiceRuns: Array<{ perSec: number; cpuUs: number }> = [];
  let failed = 0;
  for (let i = 0; i < 3; i++) {
    bareRuns.push(await bare());
    const s = await sluice(`${tmp.dir}/store-${i}`, { tool: 'noop', session: true });
    sluiceRuns.push(s);
    failed += s.failed;
  }
  // One engine each: these only say where the CPU goes, they have no target.
  const noSession = await sluice(`${tmp.dir}/store-no-session`, { tool: 'noop', session: false });
  const silent = await sluice(`${tmp.dir}/store-silent`, { tool: 'silent', session: false });
  failed += noSession.failed + silent.failed;
  const s = median(sluiceRuns.map((r) => r.perSec));
  const b = median(bareRuns.map((r) => r.perSec));
  const round = (x: number) => Math.round(x);
  report({
    bench: 'overhead',
    calls: CALLS,
    warmup: WARMUP,
    inFlight: IN_FLIGHT,
    sluiceCallsPerSec: round(s),
    barePiscinaTasksPerSec: round(b),
    ratioToBare: Math.round((s / b) * 1000) / 1000,
    failed,
    storeDir: tmp.dir,
    inodeCreateUs,
    attribution: {
      budgetCpuUsPerCall: round((availableParallelism() * 1e6) / 1500),
      cpuUsPerCall: {
        full: round(median(sluiceRuns.map((r) => r.cpuUs))),
        noSession: round(noSession.cpuUs),
        silentNoSession: round(silent.cpuUs),
        barePiscinaTask: round(median(bareRuns.map((r) => r.cpuUs))),
      },
      callsPerSec: { noSession: round(noSession.perSec), silentNoSession: round(silent.perSec) },
      durableFileCpuUs,
      floorCpuUsPerCall: round(silent.cpuUs + durableFileCpuUs.total),
    },
    target: '>= 1500 calls/s (published and recorded), 16 in flight',
    pass: s >= 1500 && failed === 0,
  });
} finally {
  tmp.remove();
}
