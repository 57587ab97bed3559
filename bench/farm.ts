/**
 * The farm (docs/farm.md) against one worker and against a local batch, on
 * a nats-server of its own (.ci/queue-up.sh) and real `sluice worker`
 * processes over one store:
 *
 * - throughput: SLUICE_BENCH_FARM_CALLS calls of `sleep 1` through one
 *   worker, then through three, each at SLUICE_BENCH_FARM_CONCURRENCY;
 *   the ratio of the rates (target >= 2.7: three workers nearly triple a
 *   farm bound by its calls, not by the queue);
 * - overhead: SLUICE_BENCH_FARM_SMALL calls of `true` one at a time (one
 *   worker at concurrency 1) against a local batch at concurrency 1, three
 *   rounds each, alternating; the median per-call time of each, and the
 *   difference (target <= 5 ms: what a queued call adds).
 *
 *   SLUICE_BENCH_FARM_CALLS (600), SLUICE_BENCH_FARM_CONCURRENCY (50), SLUICE_BENCH_FARM_SMALL (200)
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Engine } from '../engine/engine.js';
import { FarmQueue } from '../engine/farm/queue.js';
import { runFarmBatch } from '../engine/farm/submit.js';
import { hostSample, hostShare } from './host.js';
import { ROOT } from './results.js';
import { passes, target } from './targets.js';
import { envInt, median, report, tempDir } from './util.js';

const CALLS = envInt('SLUICE_BENCH_FARM_CALLS', 600);
const CONCURRENCY = envInt('SLUICE_BENCH_FARM_CONCURRENCY', 50);
const SMALL = envInt('SLUICE_BENCH_FARM_SMALL', 200);
const ROUNDS = 3;
const MAIN = join(ROOT, 'dist', 'cli', 'main.js');

const tmp = tempDir('sluice-bench-farm-');
const qdir = join(tmp.dir, 'queue');
const store = join(tmp.dir, 'store');
const children: ChildProcess[] = [];

function queueUp(): string {
  const out = execFileSync(join(ROOT, '.ci/queue-up.sh'), [qdir], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const url = /SLUICE_TEST_QUEUE=(\S+)/.exec(out)?.[1];
  if (!url) throw new Error(`queue-up printed no URL: ${out}`);
  return url.replace(/\/sluice$/, '');
}

/** Starts a `sluice worker`; resolves once it takes. */
async function worker(url: string, concurrency: number): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [MAIN, 'worker', '--queue', url, '--store', store, '--concurrency', String(concurrency)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  children.push(child);
  for await (const line of createInterface({ input: child.stdout! })) if (line.includes('taking from')) break;
  return child;
}

async function stop(ws: ChildProcess[]): Promise<void> {
  await Promise.all(
    ws.map(
      (w) =>
        new Promise<void>((r) => {
          w.once('exit', () => r());
          w.kill('SIGTERM');
        }),
    ),
  );
}

/** Runs `n` calls of `command` as batch `session` on the farm; milliseconds from the first submit to the last result. */
async function farmBatch(q: FarmQueue, session: string, n: number, command: string): Promise<number> {
  const items = Array.from({ length: n }, (_, i) => ({ id: `i${i}`, tool: 'bash', args: { command } }));
  const t0 = performance.now();
  let failed = 0;
  for await (const r of runFarmBatch(items, { queue: q, session })) if (r.farm?.status !== 'success') failed++;
  if (failed > 0) throw new Error(`${failed} farm calls failed`);
  return performance.now() - t0;
}

async function throughput(name: string, workers: number): Promise<number> {
  const url = `${queueUp()}/${name}`;
  const q = await FarmQueue.open(url, { worker: 'bench' });
  const ws = await Promise.all(Array.from({ length: workers }, () => worker(url, CONCURRENCY)));
  const ms = await farmBatch(q, name, CALLS, 'sleep 1');
  await stop(ws);
  await q.close();
  return (CALLS * 1000) / ms;
}

async function overhead(): Promise<{ farmMs: number; localMs: number }> {
  const url = `${queueUp()}/small`;
  const q = await FarmQueue.open(url, { worker: 'bench' });
  const [w] = [await worker(url, 1)];
  const engine = await Engine.open({ store: join(tmp.dir, 'local'), concurrency: 1 });
  const farm: number[] = [];
  const local: number[] = [];
  try {
    // A warm-up of each, not counted.
    await farmBatch(q, 'warm', 20, 'true');
    for await (const _ of engine.batch(
      Array.from({ length: 20 }, (_, i) => ({ id: `w${i}`, tool: 'bash', args: { command: 'true' } })),
    )) {
    }
    for (let round = 0; round < ROUNDS; round++) {
      farm.push((await farmBatch(q, `small-${round}`, SMALL, 'true')) / SMALL);
      const items = Array.from({ length: SMALL }, (_, i) => ({
        id: `l${round}-${i}`,
        tool: 'bash',
        args: { command: 'true' },
      }));
      const t0 = performance.now();
      for await (const r of engine.batch(items, { concurrency: 1 })) {
        if (r.result?.status !== 'success') throw new Error('a local call failed');
      }
      local.push((performance.now() - t0) / SMALL);
    }
  } finally {
    await engine.close();
    await stop([w!]);
    await q.close();
  }
  return { farmMs: median(farm), localMs: median(local) };
}

try {
  const before = hostSample();
  const one = await throughput('one', 1);
  const three = await throughput('three', 3);
  const { farmMs, localMs } = await overhead();
  const host = hostShare(before, hostSample());
  const ratio = three / one;
  const added = farmMs - localMs;
  const targets = [
    target('farm.throughput', `3 workers vs 1 on ${CALLS} calls of sleep 1 >= 2.7x`, ratio, '>=', 2.7, 'x', 2),
    target('farm.overhead', 'a queued call adds to a local batch call (median) <= 5 ms', added, '<=', 5, 'ms', 2),
  ];
  report({
    bench: 'farm',
    calls: CALLS,
    concurrency: CONCURRENCY,
    oneWorkerCallsPerSecond: Math.round(one * 10) / 10,
    threeWorkersCallsPerSecond: Math.round(three * 10) / 10,
    small: SMALL,
    farmPerCallMs: Math.round(farmMs * 100) / 100,
    localPerCallMs: Math.round(localMs * 100) / 100,
    ...(host ? { host } : {}),
    targets,
    pass: passes(targets),
  });
} finally {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  try {
    execFileSync(join(ROOT, '.ci/queue-down.sh'), [qdir], { stdio: 'ignore' });
  } catch {}
  tmp.remove();
}
