/**
 * Startup (target 6): wall time from a cold process start to the end of the
 * first bash call (`true`) after Engine.open, beside a bare `node -e ''`
 * start for contrast. Median of several cold processes.
 *
 *   SLUICE_BENCH_STARTUP_RUNS (default 7)
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envInt, median, report, tempDir } from './util.js';

const RUNS = envInt('SLUICE_BENCH_STARTUP_RUNS', 7);
const once = fileURLToPath(new URL('./startup-once.js', import.meta.url));

const tmp = tempDir('sluice-bench-startup-');
try {
  const wall: number[] = [];
  const inProcess: number[] = [];
  const bare: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    let t0 = performance.now();
    const r = spawnSync(process.execPath, [once, join(tmp.dir, 'store')], { encoding: 'utf8' });
    wall.push(performance.now() - t0);
    const out = JSON.parse(r.stdout.trim()) as { ms: number; status: string };
    if (out.status !== 'success') throw new Error(`first call failed: ${r.stdout} ${r.stderr}`);
    inProcess.push(out.ms);
    t0 = performance.now();
    spawnSync(process.execPath, ['-e', ''], { encoding: 'utf8' });
    bare.push(performance.now() - t0);
  }
  const ms = median(inProcess);
  report({
    bench: 'startup',
    runs: RUNS,
    openPlusFirstCallMs: Math.round(ms),
    processWallMs: Math.round(median(wall)),
    bareNodeWallMs: Math.round(median(bare)),
    target: 'engine open + first bash call < 300 ms from a cold process',
    pass: ms < 300,
  });
} finally {
  tmp.remove();
}
