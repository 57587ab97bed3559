/**
 * Exactly one result per item, whatever dies: three `sluice worker`
 * processes (each in its own directory, one shared store: a directory, and
 * an S3 prefix of a real Ceph RGW with a local directory per process) run a batch of
 * mixed calls while one is SIGKILLed mid-run, another is SIGSTOPped past
 * its lease and resumed (its late results fenced out), the queue server
 * restarts on its store, the submitter is SIGKILLed and resumed, and a
 * fourth process collects garbage with grace 0 meanwhile. After: every
 * item once, the outputs equal (digests) to a single-host run of the same
 * batch, `sluice verify` clean, no process left.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { BatchResult } from '../../engine/batch/batch.js';
import { Engine } from '../../engine/engine.js';
import { FarmQueue } from '../../engine/farm/index.js';
import { ROOT } from '../cli/helpers.js';
import { deletePrefix, hostEnv } from '../store/backends.js';
import { ownServersPossible } from '../support/queue.js';
import { type S3Service, s3Service } from '../support/s3.js';
import { sleep } from './helpers.js';
import { alive, type Proc, startWorker, type TestProcesses, useProcesses } from './processes.js';

const run = promisify(execFile);
const own = await ownServersPossible();
// Without S3 the reason is printed once at the end of the run, as for every S3 suite.
const s3 = own ? await s3Service() : undefined;
/** Items per run: SLUICE_FARM_ITEMS, else the backend's default (sized to keep `npm test` short). */
const items = (fallback: number) => Number(process.env.SLUICE_FARM_ITEMS ?? fallback);

/** The farm's shared store, and the environment of each `sluice` process on it. */
interface FarmStore {
  readonly name: string;
  /** Items in the batch (measured at load ~6 on 2 cores: ~35 s at 300 on a directory, ~40 s at 100 on Ceph). */
  readonly items: number;
  /** Opens a fresh store for the test (removed after it). */
  open(procs: TestProcesses, dir: string): Promise<{ store: string; env(cwd: string): NodeJS.ProcessEnv }>;
}

const DIRECTORY: FarmStore = {
  name: 'a directory store',
  items: items(300),
  async open(_procs, dir) {
    return { store: join(dir, 'store'), env: () => ({}) };
  },
};

/** A fresh prefix of the run's bucket; every process has its own local directory, `local` in its working directory. */
const s3Store = (s3: S3Service): FarmStore => ({
  name: 'an S3 store (Ceph RGW)',
  items: items(100),
  async open(procs, _dir) {
    const prefix = `farm-${randomBytes(6).toString('hex')}`;
    procs.defer(() => deletePrefix(s3, s3.bucket, `${prefix}/`));
    return { store: `s3://${s3.bucket}/${prefix}`, env: (cwd) => hostEnv(s3, cwd, 'local') };
  },
});

/** A deterministic mixed call: output sizes, exit codes and durations vary with i. */
function call(i: number): string {
  const kinds = [
    `echo item ${i}; sleep 0.${(i % 4) + 1}`,
    `seq 1 ${(i % 50) * 200}; echo done >&2`,
    `printf 'x%.0s' $(seq 1 ${i % 97}); exit ${i % 3}`,
    `head -c ${(i % 7) * 40000} /dev/zero | tr '\\0' y; sleep 0.1`,
  ];
  return JSON.stringify({ id: `m${i}`, tool: 'bash', args: { command: kinds[i % kinds.length] } });
}

const parse = (stdout: string): BatchResult[] =>
  stdout
    .slice(0, stdout.lastIndexOf('\n') + 1)
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as BatchResult);

/** The output URI of a local result, as a farm result names it. */
function uriOf(r: BatchResult): string | null {
  const o = r.result?.output;
  if (!o) return null;
  return o.kind === 'streams' ? `artifact://${o.manifest}` : o.kind === 'single' ? `artifact://${o.digest}` : null;
}

/** Resolves once `p` printed `n` results; rejects when it exits first or the test ends. */
async function printedAtLeast(p: Proc, n: number, signal: AbortSignal): Promise<void> {
  while (parse(p.stdout).length < n) {
    signal.throwIfAborted();
    if (p.child.exitCode !== null || p.child.signalCode !== null) {
      throw new Error(`the submitter exited after ${parse(p.stdout).length} of ${n} results: ${p.stderr}`);
    }
    await sleep(20);
  }
}

describe.runIf(own).each([DIRECTORY, ...(s3 ? [s3Store(s3)] : [])])('exactly once on a farm, on $name', (backend) => {
  const procs = useProcesses();
  const N = backend.items;

  it(
    `${N} mixed calls through SIGKILL, SIGSTOP past the lease, a queue restart and a resumed submitter: each result once, equal to one host`,
    async () => {
      const dir = await procs.dir();
      const qdir = join(dir, 'queue');
      const { store, env } = await backend.open(procs, dir);
      const input = join(dir, 'calls.jsonl');
      await fsp.writeFile(input, `${Array.from({ length: N }, (_, i) => call(i)).join('\n')}\n`);
      const { signal } = procs;
      const url = await procs.queueServer(qdir);
      const spawned: Proc[] = [];
      // The queue is created with a short lease, which every worker adopts.
      const q = await FarmQueue.open(url, { ackWaitMs: 1000, maxAttempts: 6, worker: 'test' });
      procs.defer(() => q.close());
      const workers: Proc[] = [];
      for (const name of ['w1', 'w2', 'w3']) {
        workers.push(await startWorker(procs, url, store, ['--name', name, '--concurrency', '4'], env));
      }
      spawned.push(...workers);
      const [w1, w2, w3] = workers as [Proc, Proc, Proc];

      // A fourth process collects with grace 0 the whole time; its failures are checked at the end.
      let collecting = true;
      const gcFailures: string[] = [];
      const gcLoop = (async () => {
        let runs = 0;
        while (collecting && !signal.aborted) {
          const gc = procs.spawn(['gc', '--grace', '0', '--json'], dir, {
            ...env(join(dir, 'gc')),
            SLUICE_STORE: store,
          });
          spawned.push(gc);
          const { code } = await gc.exited;
          if (code !== 0) gcFailures.push(`exit ${code}: ${gc.stderr}`);
          runs++;
        }
        return runs;
      })().catch((e: unknown) => {
        gcFailures.push(String(e));
        return 0;
      });

      const first = procs.spawn(['batch', input, '--queue', url, '--session', 'farm'], dir);
      spawned.push(first);
      await printedAtLeast(first, N / 6, signal);
      w1.child.kill('SIGKILL');
      w2.child.kill('SIGSTOP');
      await printedAtLeast(first, N / 3, signal);
      first.child.kill('SIGKILL');
      await first.exited;
      const printed = parse(first.stdout);

      // The server stops and comes back on its store and port; the clients reconnect.
      await run(join(ROOT, '.ci/queue-down.sh'), [qdir]);
      await sleep(300);
      expect(await procs.queueServer(qdir)).toBe(url);

      const second = procs.spawn(['batch', input, '--queue', url, '--session', 'farm', '--ordered'], dir);
      spawned.push(second);
      // Past its lease, w2's calls went to w3; woken, its results for them are refused.
      await sleep(2500);
      w2.child.kill('SIGCONT');
      const done = await second.exited;
      expect(done.code === 0 || done.code === 1, second.stderr).toBe(true);
      collecting = false;
      expect(await gcLoop).toBeGreaterThan(0);
      expect(gcFailures).toEqual([]);

      const results = parse(second.stdout);
      expect(results.map((r) => r.index)).toEqual([...Array(N).keys()]);
      expect(new Set(results.map((r) => r.id)).size).toBe(N);
      for (const r of printed) expect(results[r.index]?.resumed).toBe(true);
      for (const r of printed) expect(results[r.index]?.farm).toEqual(r.farm);
      // The queue holds one result per item.
      let recorded = 0;
      const seen = new Set<string>();
      for await (const r of q.results('farm')) {
        expect(seen.has(r.itemId)).toBe(false);
        seen.add(r.itemId);
        recorded++;
      }
      expect(recorded).toBe(N);
      const attempts = results.map((r) => r.farm?.attempts ?? 0);
      expect(Math.max(...attempts)).toBeGreaterThan(1);
      expect(new Set(results.map((r) => r.farm?.worker))).toContain('w3');

      for (const w of [w2, w3]) w.child.kill('SIGTERM');
      for (const w of [w2, w3]) expect((await w.exited).code).toBe(0);
      expect(w2.stderr).toMatch(/stopped: \d+ recorded/);
      await q.close();

      // The same batch on one host: the same outputs, digest for digest.
      const one = procs.spawn(['batch', input, '--session', 'ref', '--ordered', '--store', join(dir, 'ref')], dir);
      spawned.push(one);
      await one.exited;
      const ref = parse(one.stdout);
      expect(ref).toHaveLength(N);
      for (let i = 0; i < N; i++) {
        expect(results[i]?.farm?.output, `item ${i}`).toBe(uriOf(ref[i]!));
        expect(results[i]?.farm?.status, `item ${i}`).toBe(ref[i]?.result?.status);
      }

      const verify = procs.spawn(['verify', '--json'], dir, { ...env(join(dir, 'verify')), SLUICE_STORE: store });
      spawned.push(verify);
      expect((await verify.exited).code, verify.stdout + verify.stderr).toBe(0);
      // Nothing referenced was collected: every output reads back (on S3, from a local directory of its own).
      const saved = process.env.SLUICE_STORE_LOCAL;
      const local = env(join(dir, 'reader')).SLUICE_STORE_LOCAL;
      if (local !== undefined) process.env.SLUICE_STORE_LOCAL = local;
      const engine = await Engine.open({ store }).finally(() => {
        if (saved === undefined) delete process.env.SLUICE_STORE_LOCAL;
        else process.env.SLUICE_STORE_LOCAL = saved;
      });
      try {
        for (const r of results) {
          const uri = r.farm?.output;
          if (uri) await engine.readBytes(`${uri}/stdout`);
        }
      } finally {
        await engine.close();
      }
      for (const p of spawned) expect(alive(p.child.pid!)).toBe(false);
    },
    Math.max(300_000, N * 600),
  );
});
