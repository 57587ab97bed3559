/**
 * Startup: wall time from a cold process start to the end of the
 * first bash call (`true`) after Engine.open, against a bare `node -e ''`
 * run alternately with it: the target is what sluice adds to a bare Node
 * start (each cold process's time less the bare start measured beside it,
 * median of the differences), so a slower host moves both sides. With the
 * median of each phase (Node's start-up, importing the engine, Engine.open,
 * the call) and of the CPU time the process used by the end of the call.
 *
 *   SLUICE_BENCH_STARTUP_RUNS (default 7)
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { passes, target } from './targets.js';
import { envInt, median, report, tempDir } from './util.js';

const RUNS = envInt('SLUICE_BENCH_STARTUP_RUNS', 7);
const once = fileURLToPath(new URL('./startup-once.js', import.meta.url));

const tmp = tempDir('sluice-bench-startup-');
try {
  const wall: number[] = [];
  const inProcess: number[] = [];
  const cpu: number[] = [];
  const phases = { bootMs: [] as number[], importMs: [] as number[], openMs: [] as number[], callMs: [] as number[] };
  const bare: number[] = [];
  const overBare: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    let t0 = performance.now();
    const r = spawnSync(process.execPath, [once, join(tmp.dir, 'store')], { encoding: 'utf8' });
    wall.push(performance.now() - t0);
    const out = JSON.parse(r.stdout.trim()) as { ms: number; cpuMs: number; status: string } & Record<
      keyof typeof phases,
      number
    >;
    if (out.status !== 'success') throw new Error(`first call failed: ${r.stdout} ${r.stderr}`);
    inProcess.push(out.ms);
    cpu.push(out.cpuMs);
    for (const k of Object.keys(phases) as (keyof typeof phases)[]) phases[k].push(out[k]);
    t0 = performance.now();
    spawnSync(process.execPath, ['-e', ''], { encoding: 'utf8' });
    bare.push(performance.now() - t0);
    overBare.push(out.ms - (bare.at(-1) as number));
  }
  const ms = median(inProcess);
  const over = median(overBare);
  const targets = [
    target(
      'startup.first-call',
      "engine open + first `bash true` from a cold process <= a bare `node -e ''` + 120 ms",
      over,
      '<=',
      120,
      'ms',
      0,
    ),
  ];
  report({
    bench: 'startup',
    runs: RUNS,
    openPlusFirstCallMs: Math.round(ms),
    overBareNodeMs: Math.round(over),
    phasesMs: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k.replace(/Ms$/, ''), Math.round(median(v))])),
    processCpuMs: Math.round(median(cpu)),
    processWallMs: Math.round(median(wall)),
    bareNodeWallMs: Math.round(median(bare)),
    targets,
    pass: passes(targets),
  });
} finally {
  tmp.remove();
}
