/**
 * The farm (docs/farm.md) against one worker and against a local batch, on
 * a nats-server of its own (.ci/queue-up.sh) and real `sluice worker`
 * processes over one store:
 *
 * - throughput: SLUICE_BENCH_FARM_CALLS calls of `sleep 1` through one
 *   worker, then through three, each at SLUICE_BENCH_FARM_CONCURRENCY
 *   (default: the worker's own default, max(16, 2 x cores)); the ratio of
 *   the rates (target >= 2.7: three workers nearly triple a farm bound by
 *   its calls, not by the queue). The workers are started and warmed (a
 *   batch of `sleep 0.2` filling every worker's slots) before the clock
 *   starts: a farm's workers run for hours, so their start is not its
 *   throughput. The clock runs from the first submission to the last result.
 * - the host's ceiling for that ratio, without a queue: the same calls in
 *   one local engine process, then split over three at once (each warmed,
 *   at the same concurrency, recording a session as a worker does). On a
 *   machine with fewer cores than it takes to run three workers' calls, this
 *   ratio is below 3 and the farm's cannot exceed it.
 * - overhead: SLUICE_BENCH_FARM_SMALL calls of `true` one at a time (one
 *   worker at concurrency 1) against a local batch at concurrency 1 with a
 *   session (a farm batch has one, and its worker records each call in
 *   it), three rounds each, alternating; the median per-call time of each,
 *   and the difference (target <= 5 ms: what a queued call adds); beside
 *   it, the median round trip of a read from the queue (two are on a queued
 *   call's path).
 *
 *   SLUICE_BENCH_FARM_CALLS (600), SLUICE_BENCH_FARM_CONCURRENCY (the worker's default), SLUICE_BENCH_FARM_SMALL (200)
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
/** 0: the default a user gets (the engine's). */
const CONCURRENCY = envInt('SLUICE_BENCH_FARM_CONCURRENCY', 0);
const SMALL = envInt('SLUICE_BENCH_FARM_SMALL', 200);
const ROUNDS = 3;
const MAIN = join(ROOT, 'dist', 'cli', 'main.js');

if (process.argv[2] === '--local') await localChild(process.argv[3]!, Number(process.argv[4]));

/**
 * A local engine process of the ceiling measurement: opens its engine in
 * `dir`, warms it, says `ready`, and on a line from its parent runs `n`
 * calls of `sleep 1` in a session and prints the milliseconds they took.
 */
async function localChild(dir: string, n: number): Promise<never> {
  const engine = await Engine.open({ store: dir, ...(CONCURRENCY > 0 ? { concurrency: CONCURRENCY } : {}) });
  const c = engine.options.concurrency;
  const batch = async (session: string, count: number, command: string) => {
    const items = Array.from({ length: count }, (_, i) => ({ id: `${session}${i}`, tool: 'bash', args: { command } }));
    for await (const r of engine.batch(items, { session })) {
      if (r.result?.status !== 'success') throw new Error('a local call failed');
    }
  };
  await batch('warm', c, 'sleep 0.2');
  process.stdout.write('ready\n');
  for await (const _ of createInterface({ input: process.stdin })) break;
  const t0 = performance.now();
  await batch('run', n, 'sleep 1');
  process.stdout.write(`${performance.now() - t0}\n`);
  await engine.close();
  process.exit(0);
}

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
    [
      MAIN,
      'worker',
      '--queue',
      url,
      '--store',
      store,
      ...(concurrency > 0 ? ['--concurrency', String(concurrency)] : []),
    ],
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

/** The concurrency a worker runs at: the bench's setting, else the engine's default. */
async function workerConcurrency(): Promise<number> {
  if (CONCURRENCY > 0) return CONCURRENCY;
  const engine = await Engine.open({ store: join(tmp.dir, 'defaults') });
  try {
    return engine.options.concurrency;
  } finally {
    await engine.close();
  }
}

async function throughput(name: string, workers: number, concurrency: number): Promise<number> {
  const url = `${queueUp()}/${name}`;
  const q = await FarmQueue.open(url, { worker: 'bench' });
  const ws = await Promise.all(Array.from({ length: workers }, () => worker(url, CONCURRENCY)));
  // Every worker's slots filled once: its engine, session log and spawn helper are warm.
  await farmBatch(q, `${name}-warm`, workers * concurrency, 'sleep 0.2');
  const ms = await farmBatch(q, name, CALLS, 'sleep 1');
  await stop(ws);
  await q.close();
  return (CALLS * 1000) / ms;
}

/** Calls per second of CALLS calls of `sleep 1` split over `procs` local engine processes started at once (see the module comment). */
async function ceiling(procs: number): Promise<number> {
  const kids = Array.from({ length: procs }, (_, i) => {
    const n = Math.floor(CALLS / procs) + (i < CALLS % procs ? 1 : 0);
    const child = spawn(
      process.execPath,
      [process.argv[1]!, '--local', join(tmp.dir, `local-${procs}-${i}`), String(n)],
      {
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    );
    children.push(child);
    return { child, lines: createInterface({ input: child.stdout! })[Symbol.asyncIterator]() };
  });
  for (const k of kids) if ((await k.lines.next()).value !== 'ready') throw new Error('a local engine did not start');
  for (const k of kids) k.child.stdin!.write('go\n');
  const ms = await Promise.all(kids.map(async (k) => Number((await k.lines.next()).value)));
  return (CALLS * 1000) / Math.max(...ms);
}

/**
 * The median of SMALL reads of a result that does not stand, one after
 * another: the round trip to nats-server that a queued call makes twice on
 * its path (the pull that brings it, the read of whether its result stands).
 */
async function roundTrip(q: FarmQueue): Promise<number> {
  const ms: number[] = [];
  for (let i = 0; i < SMALL; i++) {
    const t0 = performance.now();
    await q.result('round-trip', `r${i}`);
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

async function overhead(): Promise<{ farmMs: number; localMs: number; roundTripMs: number }> {
  const url = `${queueUp()}/small`;
  const q = await FarmQueue.open(url, { worker: 'bench' });
  const [w] = [await worker(url, 1)];
  const engine = await Engine.open({ store: join(tmp.dir, 'local'), concurrency: 1 });
  const farm: number[] = [];
  const local: number[] = [];
  const trips: number[] = [];
  try {
    // A warm-up of each, not counted.
    await farmBatch(q, 'warm', 20, 'true');
    for await (const _ of engine.batch(
      Array.from({ length: 20 }, (_, i) => ({ id: `w${i}`, tool: 'bash', args: { command: 'true' } })),
    )) {
    }
    for (let round = 0; round < ROUNDS; round++) {
      farm.push((await farmBatch(q, `small-${round}`, SMALL, 'true')) / SMALL);
      trips.push(await roundTrip(q));
      const items = Array.from({ length: SMALL }, (_, i) => ({
        id: `l${round}-${i}`,
        tool: 'bash',
        args: { command: 'true' },
      }));
      const t0 = performance.now();
      for await (const r of engine.batch(items, { concurrency: 1, session: `local-${round}` })) {
        if (r.result?.status !== 'success') throw new Error('a local call failed');
      }
      local.push((performance.now() - t0) / SMALL);
    }
  } finally {
    await engine.close();
    await stop([w!]);
    await q.close();
  }
  return { farmMs: median(farm), localMs: median(local), roundTripMs: median(trips) };
}

try {
  const before = hostSample();
  const concurrency = await workerConcurrency();
  const one = await throughput('one', 1, concurrency);
  const three = await throughput('three', 3, concurrency);
  const localOne = await ceiling(1);
  const localThree = await ceiling(3);
  const { farmMs, localMs, roundTripMs } = await overhead();
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
    concurrency,
    oneWorkerCallsPerSecond: Math.round(one * 10) / 10,
    threeWorkersCallsPerSecond: Math.round(three * 10) / 10,
    localOneCallsPerSecond: Math.round(localOne * 10) / 10,
    localThreeCallsPerSecond: Math.round(localThree * 10) / 10,
    hostCeilingRatio: Math.round((localThree / localOne) * 100) / 100,
    small: SMALL,
    farmPerCallMs: Math.round(farmMs * 100) / 100,
    localPerCallMs: Math.round(localMs * 100) / 100,
    queueRoundTripMs: Math.round(roundTripMs * 100) / 100,
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
