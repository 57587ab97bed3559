/**
 * Concurrency (target 4): 16 concurrent bash calls of 128 MiB each; aggregate
 * throughput against one 1 GiB-class single call measured in the same run
 * (target 1's figure), and peak RSS growth.
 *
 *   SLUICE_BENCH_CONC_CALLS (default 16), SLUICE_BENCH_CONC_BYTES (default 128 MiB)
 */
import { join } from 'node:path';
import { Engine } from '../engine/engine.js';
import { envInt, mibps, report, tempDir, withPeakRss } from './util.js';

const CALLS = envInt('SLUICE_BENCH_CONC_CALLS', 16);
const EACH = envInt('SLUICE_BENCH_CONC_BYTES', 128 * 1024 ** 2);
const cmd = (bytes: number) => `yes abcdefghijklmnopqrstuvwxyz0123456789 | head -c ${bytes}`;

const tmp = tempDir('sluice-bench-conc-');
try {
  const engine = await Engine.open({ store: join(tmp.dir, 'store'), concurrency: CALLS, minThreads: CALLS });
  await Promise.all(Array.from({ length: CALLS }, () => engine.run('bash', { command: 'true' }))); // warm every thread
  const total = CALLS * EACH;
  let t0 = performance.now();
  const single = await engine.run('bash', { command: cmd(total) });
  const singleMs = performance.now() - t0;
  if (single.status !== 'success') throw new Error(single.model);
  global.gc?.();
  t0 = performance.now();
  const { value: results, peakGrowth } = await withPeakRss(() =>
    Promise.all(
      Array.from({ length: CALLS }, (_, i) => engine.run('bash', { command: `${cmd(EACH)}; echo ${i} >&2` })),
    ),
  );
  const concMs = performance.now() - t0;
  await engine.close();
  const failed = results.filter((r) => r.status !== 'success').length;
  const ratio = Math.round((singleMs / concMs) * 1000) / 1000;
  report({
    bench: 'concurrency',
    calls: CALLS,
    bytesEach: EACH,
    singleCallMiBps: mibps(total, singleMs),
    aggregateMiBps: mibps(total, concMs),
    ratio,
    peakRssGrowthMiB: Math.round(peakGrowth / 1024 / 1024),
    failed,
    target: 'aggregate >= 0.8x the single-call throughput, RSS growth <= 256 MiB',
    pass: ratio >= 0.8 && peakGrowth <= 256 * 1024 * 1024 && failed === 0,
  });
} finally {
  tmp.remove();
}
