/**
 * Memory: peak RSS growth while one bash call captures N bytes
 * split over stdout and stderr, for 2 GiB and for 256 MiB (flat, not linear),
 * beside a naive in-memory capture (concatenating the output into strings on
 * the main thread) of the same command for contrast.
 *
 * Each size is measured SLUICE_BENCH_MEM_RUNS times, alternating: every 2 GiB
 * round must stay under the bound, and the medians are compared for
 * flatness.
 *
 *   SLUICE_BENCH_MEM_BYTES (default 2 GiB), SLUICE_BENCH_MEM_SMALL (default 256 MiB),
 *   SLUICE_BENCH_MEM_RUNS (default 3),
 *   SLUICE_BENCH_NAIVE_BYTES (default 512 MiB: the naive capture's input, kept below V8's string limit)
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Engine } from '../engine/engine.js';
import { passes, target } from './targets.js';
import { envInt, median, report, tempDir, withPeakRss } from './util.js';

const BIG = envInt('SLUICE_BENCH_MEM_BYTES', 2 * 1024 ** 3);
const SMALL = envInt('SLUICE_BENCH_MEM_SMALL', 256 * 1024 ** 2);
const NAIVE = envInt('SLUICE_BENCH_NAIVE_BYTES', 512 * 1024 ** 2);
const RUNS = envInt('SLUICE_BENCH_MEM_RUNS', 3);

/** Half on stdout, half on stderr, produced concurrently. */
function command(bytes: number): string {
  const half = Math.floor(bytes / 2);
  return `(yes stdout-line-abcdefghijklmnopqrstuvwxyz | head -c ${half}) & (yes stderr-line-0123456789 | head -c ${bytes - half} >&2) & wait`;
}

async function naive(bytes: number): Promise<{ growth: number; ok: boolean; error?: string }> {
  try {
    const { value, peakGrowth } = await withPeakRss(
      () =>
        new Promise<number>((resolve, reject) => {
          const child = spawn('bash', ['-c', command(bytes)], { stdio: ['ignore', 'pipe', 'pipe'] });
          let out = '';
          let err = '';
          child.stdout.setEncoding('utf8').on('data', (d: string) => {
            out += d;
          });
          child.stderr.setEncoding('utf8').on('data', (d: string) => {
            err += d;
          });
          child.on('error', reject);
          child.on('close', () => resolve(out.length + err.length));
        }),
    );
    return { growth: peakGrowth, ok: value === bytes };
  } catch (e) {
    return { growth: Number.NaN, ok: false, error: String((e as Error).message ?? e) };
  }
}

const mib = (n: number) => Math.round((n / 1024 / 1024) * 10) / 10;

const tmp = tempDir('sluice-bench-memory-');
try {
  const engine = await Engine.open({ store: join(tmp.dir, 'store') });
  // Warm: the first capture grows the heaps once (pool, buffers, the thread pool); that is not growth
  // with output size. Warmed with the smaller size itself, so both measurements start from the same state.
  await engine.run('bash', { command: command(SMALL) });
  const measure = async (bytes: number) => {
    global.gc?.();
    const { value: r, peakGrowth } = await withPeakRss(() => engine.run('bash', { command: command(bytes) }));
    if (r.status !== 'success' || r.output?.kind !== 'streams') throw new Error(`bench call failed: ${r.model}`);
    const total = r.output.streams.reduce((a, s) => a + s.bytes, 0);
    if (total !== bytes) throw new Error(`captured ${total} bytes, expected ${bytes}`);
    return peakGrowth;
  };
  const smallRuns: number[] = [];
  const bigRuns: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    smallRuns.push(await measure(SMALL));
    bigRuns.push(await measure(BIG));
  }
  const small = median(smallRuns);
  const big = median(bigRuns);
  await engine.close();
  global.gc?.();
  const n = await naive(NAIVE);
  const targets = [
    target(
      'memory.big',
      'RSS growth capturing 2 GiB over stdout + stderr ≤ 64 MiB in every round',
      Math.max(...bigRuns) / 1024 / 1024,
      '<=',
      64,
      'MiB',
      1,
    ),
    target(
      'memory.flat',
      "median growth for 2 GiB within 16 MiB of 256 MiB's (flat, not linear)",
      Math.abs(big - small) / 1024 / 1024,
      '<=',
      16,
      'MiB',
      1,
    ),
  ];
  report({
    bench: 'memory',
    bigBytes: BIG,
    smallBytes: SMALL,
    runs: RUNS,
    peakGrowthBigMiB: mib(big),
    peakGrowthSmallMiB: mib(small),
    peakGrowthBigRunsMiB: bigRuns.map(mib),
    peakGrowthSmallRunsMiB: smallRuns.map(mib),
    flatnessMiB: mib(big - small),
    naiveBytes: NAIVE,
    naivePeakGrowthMiB: mib(n.growth),
    naiveGrowthPerInputByte: Math.round((n.growth / NAIVE) * 100) / 100,
    naiveOk: n.ok,
    ...(n.error ? { naiveError: n.error } : {}),
    targets,
    pass: passes(targets),
  });
} finally {
  tmp.remove();
}
