/**
 * `npm run bench`: runs every benchmark in its own cold process, one after
 * another (they measure a shared 2-core machine; running them together would
 * measure each other), and prints one JSON object with every result and an
 * overall pass flag. Pass names to run a subset: `npm run bench -- capture`.
 * Each result carries `host` (bench/host.ts): the CPU share the hypervisor
 * stole and that other processes used while it ran, since every target here
 * is measured on a shared machine.
 *
 * Each result is also written to bench/results/<name>.json (bench/results.ts:
 * stamped with date, commit, Node and machine), and docs/benchmarks.md's
 * table is regenerated from those files, so a run of one benchmark
 * refreshes its rows alone. A run with `SLUICE_*` settings (reduced sizes,
 * another spawn helper) writes no results there: `SLUICE_BENCH_RESULTS=DIR`
 * writes them to DIR instead, and leaves the document alone. A benchmark
 * that printed no JSON, or was skipped (S3 without a service), keeps its
 * previous file.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { hostSample, hostShare } from './host.js';
import { BENCHMARKS, RESULTS_DIR, runStamp, updateDoc, writeResult } from './results.js';

async function runOne(name: string): Promise<Record<string, unknown>> {
  const file = fileURLToPath(new URL(`./${name}.js`, import.meta.url));
  // Sampled before the spawn, so the child's first CPU is in both the machine's and the tree's share.
  const before = hostSample();
  const child = spawn(process.execPath, ['--expose-gc', file], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d: string) => {
    out += d;
  });
  const code = await new Promise<number | null>((r) => child.on('close', r));
  // The child has been reaped by now, so its CPU and that of the processes it reaped count as the
  // benchmark's; tools started by the engine's spawn helpers do not (bench/host.ts).
  const host = hostShare(before, hostSample());
  const last = out.trim().split('\n').pop() ?? '';
  try {
    return { ...JSON.parse(last), exitCode: code, ...(host ? { host } : {}) };
  } catch {
    return { bench: name, exitCode: code, error: `no JSON result: ${last.slice(0, 200)}`, pass: false };
  }
}

const wanted = process.argv.slice(2);
const unknown = wanted.filter((n) => !(BENCHMARKS as readonly string[]).includes(n));
if (unknown.length > 0) {
  process.stderr.write(`unknown benchmark ${unknown.join(', ')}; the benchmarks: ${BENCHMARKS.join(', ')}\n`);
  process.exit(2);
}
const names = wanted.length > 0 ? wanted : BENCHMARKS;
// The commit is read before any result is written.
const stamp = runStamp();
const chosen = process.env.SLUICE_BENCH_RESULTS;
const settings = Object.entries(stamp.env).map(([k, v]) => `${k}=${v}`);
const dir = chosen || (settings.length === 0 ? RESULTS_DIR : undefined);
if (!dir) {
  process.stderr.write(
    `not writing bench/results: the run has ${settings.join(' ')}; set SLUICE_BENCH_RESULTS=DIR to keep its results\n`,
  );
}
const results: Record<string, unknown>[] = [];
for (const name of names) {
  const r = await runOne(name);
  results.push(r);
  process.stderr.write(`${JSON.stringify(r)}\n`);
  if (dir && !('error' in r) && !('skipped' in r)) writeResult(r, stamp, dir);
}
if (dir === RESULTS_DIR) {
  const missing = updateDoc();
  if (missing.length > 0) process.stderr.write(`docs/benchmarks.md has no rows yet for ${missing.join(', ')}\n`);
}
const pass = results.every((r) => r.pass !== false && r.exitCode === 0);
process.stdout.write(`${JSON.stringify({ results, pass }, null, 2)}\n`);
process.exitCode = pass ? 0 : 1;
