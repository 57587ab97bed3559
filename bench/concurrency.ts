/**
 * Concurrency: 16 concurrent bash calls of 128 MiB each; their aggregate
 * throughput against one single call of the same total bytes measured in
 * the same round: median >= 0.9x, the first round of a fresh engine >= 0.8x;
 * and peak RSS growth.
 *
 * Rounds of (single call, then the concurrent calls) repeat
 * SLUICE_BENCH_CONC_RUNS times. The median ratio is quoted and checked, with
 * the throughputs of that round; RSS growth is checked at its largest, per
 * round and above the RSS before the first round. The first round of a
 * fresh engine is the slowest (16 captures touch memory for the first time);
 * it counts like the others. Each round's concurrent part also reports the
 * process's CPU time (all its threads) and minor page faults: the first
 * round's excess shows in them even when other work on the machine makes
 * the wall-clock ratios noisy (docs/benchmarks.md, "Concurrent captures").
 *
 * Every phase starts with the bench's earlier blobs collected (nothing
 * references them). On this VM a write is about twice as fast while the
 * page cache holds less than ~2 GiB as once it holds more (dd of 2 GiB:
 * 2.2-4.1 s against 6.4-7.8 s, the same file system, 18 GiB free;
 * docs/benchmarks.md, "The page cache"); without the collection each
 * round's single call would inherit the cache the phase before it left, and
 * a fresh engine's first single call would run in the fast regime against
 * concurrent calls in the slow one. Each phase's cached MiB at its start is
 * reported.
 *
 *   SLUICE_BENCH_CONC_CALLS (default 16), SLUICE_BENCH_CONC_BYTES (default 128 MiB),
 *   SLUICE_BENCH_CONC_RUNS (default 5)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../engine/engine.js';
import { passes, target } from './targets.js';
import { envInt, mibps, report, tempDir, withPeakRss } from './util.js';

const CALLS = envInt('SLUICE_BENCH_CONC_CALLS', 16);
const EACH = envInt('SLUICE_BENCH_CONC_BYTES', 128 * 1024 ** 2);
const RUNS = envInt('SLUICE_BENCH_CONC_RUNS', 5);
/**
 * `bytes` of `yes` output after a first line naming the call (`tag`): every call publishes a blob of
 * its own. Sixteen calls of one content would deduplicate fifteen of them, which then skip the final
 * fsync and the wait for their own background flush (store/blob-writer.ts).
 */
/** The kernel's page cache ("Cached" of /proc/meminfo), MiB. */
function cachedMiB(): number {
  const m = /^Cached:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'latin1'));
  return m ? Math.round(Number(m[1]) / 1024) : -1;
}

/** The process's CPU time (every thread, user and system) from `a` to `b`, ms. */
function cpuSince(a: NodeJS.ResourceUsage, b = process.resourceUsage()): number {
  return (b.userCPUTime + b.systemCPUTime - a.userCPUTime - a.systemCPUTime) / 1000;
}

const cmd = (bytes: number, tag: string) =>
  `{ echo ${tag}; yes abcdefghijklmnopqrstuvwxyz0123456789; } | head -c ${bytes}`;

const tmp = tempDir('sluice-bench-conc-');
try {
  const engine = await Engine.open({ store: join(tmp.dir, 'store'), concurrency: CALLS, minThreads: CALLS });
  await Promise.all(Array.from({ length: CALLS }, () => engine.run('bash', { command: 'true' }))); // warm every thread
  const total = CALLS * EACH;
  const rounds: Array<{
    singleMs: number;
    concMs: number;
    ratio: number;
    growth: number;
    cpuMs: number;
    singleCpuMs: number;
    faults: number;
    cachedMiB: [number, number];
  }> = [];
  let failed = 0;
  // Growth is measured from each round's start; this catches growth that accumulates over the rounds.
  const rss0 = process.memoryUsage.rss();
  let aboveStart = 0;
  for (let round = 0; round < RUNS; round++) {
    await engine.gc({ graceMs: 0 });
    const cachedSingle = cachedMiB();
    const useSingle = process.resourceUsage();
    let t0 = performance.now();
    const single = await engine.run('bash', { command: cmd(total, `round ${round} single`) });
    const singleMs = performance.now() - t0;
    const singleCpuMs = cpuSince(useSingle);
    if (single.status !== 'success') throw new Error(single.model);
    await engine.gc({ graceMs: 0 });
    const cachedConc = cachedMiB();
    global.gc?.();
    const rssBefore = process.memoryUsage.rss();
    const use0 = process.resourceUsage();
    t0 = performance.now();
    const { value: results, peakGrowth } = await withPeakRss(() =>
      Promise.all(
        Array.from({ length: CALLS }, (_, i) =>
          engine.run('bash', { command: `${cmd(EACH, `round ${round} call ${i}`)}; echo ${i} >&2` }),
        ),
      ),
    );
    const concMs = performance.now() - t0;
    const use1 = process.resourceUsage();
    const cpuMs = cpuSince(use0, use1);
    const faults = use1.minorPageFault - use0.minorPageFault;
    failed += results.filter((r) => r.status !== 'success').length;
    rounds.push({
      singleMs,
      concMs,
      ratio: singleMs / concMs,
      growth: peakGrowth,
      cpuMs,
      singleCpuMs,
      faults,
      cachedMiB: [cachedSingle, cachedConc],
    });
    aboveStart = Math.max(aboveStart, rssBefore + peakGrowth - rss0);
  }
  await engine.close();
  // The round with the median ratio gives the throughputs quoted beside it.
  const mid = [...rounds].sort((a, b) => a.ratio - b.ratio)[Math.floor(rounds.length / 2)] as (typeof rounds)[number];
  const ratio = Math.round(mid.ratio * 1000) / 1000;
  const growth = Math.max(...rounds.map((r) => r.growth), aboveStart);
  const targets = [
    target(
      'concurrency.median',
      '16 × 128 MiB concurrent: median aggregate ≥ 0.9× the single-call throughput of the same round',
      ratio,
      '>=',
      0.9,
      'x',
    ),
    target(
      'concurrency.first-round',
      '16 × 128 MiB concurrent: the first round of a fresh engine ≥ 0.8× its single call',
      rounds[0]?.ratio ?? 0,
      '>=',
      0.8,
      'x',
      3,
    ),
    target(
      'concurrency.rss',
      '16 × 128 MiB concurrent: RSS growth ≤ 256 MiB in every round and above the start',
      growth / 1024 / 1024,
      '<=',
      256,
      'MiB',
      0,
    ),
    target('concurrency.failed', '16 × 128 MiB concurrent: no call fails', failed, '<=', 0, 'calls'),
  ];
  report({
    bench: 'concurrency',
    calls: CALLS,
    bytesEach: EACH,
    runs: RUNS,
    singleCallMiBps: mibps(total, mid.singleMs),
    aggregateMiBps: mibps(total, mid.concMs),
    ratio,
    ratioRuns: rounds.map((r) => Math.round(r.ratio * 1000) / 1000),
    maxPeakRssGrowthMiB: Math.round(growth / 1024 / 1024),
    peakRssGrowthRunsMiB: rounds.map((r) => Math.round(r.growth / 1024 / 1024)),
    peakRssAboveStartMiB: Math.round(aboveStart / 1024 / 1024),
    firstRoundRatio: Math.round((rounds[0]?.ratio ?? 0) * 1000) / 1000,
    // The concurrent part of each round: the engine process's CPU (every thread) and minor page faults.
    concCpuMsRuns: rounds.map((r) => Math.round(r.cpuMs)),
    singleCpuMsRuns: rounds.map((r) => Math.round(r.singleCpuMs)),
    concMinorFaultsRuns: rounds.map((r) => r.faults),
    // The page cache at the start of each round's single call and of its concurrent part.
    cachedMiBRuns: rounds.map((r) => r.cachedMiB),
    failed,
    targets,
    pass: passes(targets),
  });
} finally {
  tmp.remove();
}
