/**
 * `npm run bench`: runs every benchmark in its own cold process, one after
 * another (they measure a shared 2-core machine; running them together would
 * measure each other), and prints one JSON object with every result and an
 * overall pass flag. Pass names to run a subset: `npm run bench -- capture`.
 * Each result carries `host` (bench/host.ts): the CPU share the hypervisor
 * stole and that other processes used while it ran, since every target here
 * is measured on a shared machine.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { hostSample, hostShare } from './host.js';

/**
 * Start-up runs first and the per-call overhead last: the overhead benchmark
 * creates and then deletes ~40,000 files, and on an ext4 without a journal
 * (this project's benchmark machine) creating files near recently deleted
 * ones is slower for minutes after (docs/benchmarks.md, "Inode churn").
 */
const ALL = [
  'startup',
  'capture',
  'memory',
  'concurrency',
  'read-pages',
  'search',
  'web-pager',
  'channel',
  'mcp',
  'scale',
  'pack-threshold',
  'watchdog',
  's3',
  'overhead',
];

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
const names = wanted.length > 0 ? wanted : ALL;
const results: Record<string, unknown>[] = [];
for (const name of names) {
  const r = await runOne(name);
  results.push(r);
  process.stderr.write(`${JSON.stringify(r)}\n`);
}
const pass = results.every((r) => r.pass !== false && r.exitCode === 0);
process.stdout.write(`${JSON.stringify({ results, pass }, null, 2)}\n`);
process.exitCode = pass ? 0 : 1;
