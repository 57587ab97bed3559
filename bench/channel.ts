/**
 * Per-call transport cost: a fresh MessageChannel transferred with every
 * piscina task, against one long-lived port per worker multiplexed by call id
 * (what sluice does), against bare piscina no-op tasks. 16 tasks in flight.
 *
 *   SLUICE_BENCH_CALLS (default 20000)
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { distPath } from '../engine/pool/dist-paths.js';
import { passes, target } from './targets.js';
import { envInt, median, report } from './util.js';

const CALLS = envInt('SLUICE_BENCH_CALLS', 20000);
const IN_FLIGHT = 16;

async function measure(mode: 'fresh' | 'shared' | 'none'): Promise<number> {
  const pool = new Piscina({ filename: distPath('bench/channel-worker.js'), minThreads: 2, maxThreads: 2 });
  const waiting = new Map<number, () => void>();
  pool.on('message', (m: { benchPort?: MessagePort }) => {
    // Kept referenced: an unreferenced port with a message in flight lets the process exit mid-run.
    m.benchPort?.on('message', (msg: { id: number }) => waiting.get(msg.id)?.());
  });
  const one = async (id: number): Promise<void> => {
    if (mode === 'none') {
      await pool.run({ mode, id });
      return;
    }
    const got = new Promise<void>((r) => waiting.set(id, r));
    if (mode === 'fresh') {
      const { port1, port2 } = new MessageChannel();
      port1.on('message', () => waiting.get(id)?.());
      await pool.run({ mode, id, port: port2 }, { transferList: [port2] });
      await got;
      port1.close();
    } else {
      await pool.run({ mode, id });
      await got;
    }
    waiting.delete(id);
  };
  // warm up
  await Promise.all(Array.from({ length: 64 }, (_, i) => one(-1 - i)));
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < CALLS) await one(next++);
    }),
  );
  const ms = performance.now() - t0;
  await pool.destroy();
  return CALLS / (ms / 1000);
}

const runs = { none: [] as number[], fresh: [] as number[], shared: [] as number[] };
for (let i = 0; i < 3; i++) {
  for (const mode of ['none', 'fresh', 'shared'] as const) runs[mode].push(await measure(mode));
}
const none = median(runs.none);
const fresh = median(runs.fresh);
const shared = median(runs.shared);
// The engine multiplexes one port per worker (engine/protocol/messages.ts): it has to be the faster transport.
const targets = [
  target(
    'channel.shared-port',
    'one long-lived port per worker ≥ 1.0× the calls/s of a fresh MessageChannel per call',
    shared / fresh,
    '>=',
    1,
    'x',
    2,
  ),
];
report({
  bench: 'channel',
  calls: CALLS,
  inFlight: IN_FLIGHT,
  bareTasksPerSec: Math.round(none),
  freshChannelPerSec: Math.round(fresh),
  sharedPortPerSec: Math.round(shared),
  sharedVsFresh: Math.round((shared / fresh) * 100) / 100,
  sharedVsBare: Math.round((shared / none) * 100) / 100,
  choice: shared >= fresh ? 'shared port per worker' : 'fresh channel per call',
  targets,
  pass: passes(targets),
});
