/**
 * Per-call overhead (target 3): a no-op JS tool writing 100 bytes of single
 * output, published and recorded in a session, 16 calls in flight, against
 * bare piscina no-op tasks with the same concurrency in the same run.
 *
 * Both sides are measured in steady state, after SLUICE_BENCH_WARMUP calls:
 * each engine starts its own 16 workers, and with only a few calls each
 * their code is still unoptimised (200 warm-up calls gave ~25% fewer calls
 * per second than 2000 on the same build).
 *
 *   SLUICE_BENCH_CALLS (default 5000), SLUICE_BENCH_WARMUP (default 2000)
 */
import { closeSync, mkdirSync, openSync } from 'node:fs';
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

async function bare(): Promise<number> {
  const pool = new Piscina({ filename: distPath('bench/overhead-worker.js'), minThreads: 2, maxThreads: IN_FLIGHT });
  await inFlight(WARMUP, async (i) => void (await pool.run(i)));
  const ms = await inFlight(CALLS, async (i) => void (await pool.run(i)));
  await pool.destroy();
  return CALLS / (ms / 1000);
}

async function sluice(dir: string): Promise<{ perSec: number; failed: number }> {
  const engine = await Engine.open({ store: dir, concurrency: IN_FLIGHT, minThreads: 2 });
  await engine.register(distPath('bench/tools/noop.js'));
  let failed = 0;
  const one = async (i: number) => {
    const r = await engine.run('noop', { i }, { session: 'bench' });
    if (r.status !== 'success') failed++;
  };
  await inFlight(WARMUP, one);
  const ms = await inFlight(CALLS, (i) => one(i + 1_000_000));
  await engine.close();
  return { perSec: CALLS / (ms / 1000), failed };
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

const tmp = tempDir('sluice-bench-overhead-');
try {
  const inodeCreateUs = inodeCreateMicros(tmp.dir);
  const bareRuns: number[] = [];
  const sluiceRuns: number[] = [];
  let failed = 0;
  for (let i = 0; i < 3; i++) {
    bareRuns.push(await bare());
    const s = await sluice(`${tmp.dir}/store-${i}`);
    sluiceRuns.push(s.perSec);
    failed += s.failed;
  }
  const s = median(sluiceRuns);
  const b = median(bareRuns);
  report({
    bench: 'overhead',
    calls: CALLS,
    warmup: WARMUP,
    inFlight: IN_FLIGHT,
    sluiceCallsPerSec: Math.round(s),
    barePiscinaTasksPerSec: Math.round(b),
    ratioToBare: Math.round((s / b) * 1000) / 1000,
    failed,
    storeDir: tmp.dir,
    inodeCreateUs,
    target: '>= 1500 calls/s (published and recorded), 16 in flight',
    pass: s >= 1500 && failed === 0,
  });
} finally {
  tmp.remove();
}
