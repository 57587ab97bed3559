/**
 * The committed results of `npm run bench`: one file per benchmark,
 * bench/results/<name>.json, each the benchmark's own JSON (its `targets`
 * and summary figures) stamped with when, on what commit, Node and machine
 * it ran, and how busy the host was meanwhile. docs/benchmarks.md's table
 * of every target is generated from them ({@link renderTable}; bench/run.ts
 * rewrites it after each run, bench/figures.ts on its own), and
 * test/bench/figures-table.test.ts fails when the two differ.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, platform, release, totalmem } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HostShare } from './host.js';
import type { Target } from './targets.js';

/**
 * Every benchmark, in the order `npm run bench` runs them. Start-up runs
 * first and the per-call overhead last: the overhead benchmark creates and
 * then deletes ~40,000 files, and on an ext4 without a journal (the
 * benchmark machine's) creating files near recently deleted ones is slower
 * for minutes after (docs/benchmarks.md, "Inode churn").
 */
export const BENCHMARKS = [
  'startup',
  'capture',
  'memory',
  'concurrency',
  'read-pages',
  'search',
  'web-pager',
  'channel',
  'mcp',
  'mcp-server',
  'scale',
  'sandbox',
  'pack-threshold',
  'watchdog',
  's3',
  'overhead',
  'farm',
] as const;

const here = fileURLToPath(new URL('.', import.meta.url));
/** The repository: this module runs as bench/results.ts (tests) and as dist/bench/results.js. */
export const ROOT = resolve(here, basename(resolve(here, '..')) === 'dist' ? '../..' : '..');
/** Where the committed results live. */
export const RESULTS_DIR = join(ROOT, 'bench', 'results');
/** The document whose table is generated. */
export const DOC = join(ROOT, 'docs', 'benchmarks.md');
/** The marker line before the generated table in {@link DOC}. */
export const BEGIN = '<!-- figures:begin -->';
/** The marker line after it. */
export const END = '<!-- figures:end -->';

/** The machine a run measured. */
export interface Machine {
  cores: number;
  memoryGiB: number;
  cpu: string;
  os: string;
}

/** What every result file says about its run besides the benchmark's own figures. */
export interface Stamp {
  /** UTC, ISO 8601, when the benchmark ended. */
  date: string;
  /** `git rev-parse --short HEAD` of the tree measured, `-dirty` when it had uncommitted changes ({@link commitOf}). */
  commit: string;
  node: string;
  machine: Machine;
  /**
   * The `SLUICE_*` settings the run had (sizes, spawn helper, ...): empty
   * for a run at the defaults, the only kind committed.
   */
  env: Record<string, string>;
}

/** One benchmark's result file. */
export type BenchResult = Stamp & {
  bench: string;
  pass: boolean;
  targets: Target[];
  exitCode: number | null;
  host?: HostShare;
  [figure: string]: unknown;
};

/**
 * The commit measured. What a benchmark run writes itself (the results
 * files and the table in docs/benchmarks.md) does not make the tree dirty.
 */
export function commitOf(root = ROOT): string {
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim();
    const head = git('rev-parse', '--short', 'HEAD');
    const changes = git(
      'status',
      '--porcelain',
      '--untracked-files=no',
      '--',
      '.',
      ':(exclude)bench/results',
      ':(exclude)docs/benchmarks.md',
    );
    return changes === '' ? head : `${head}-dirty`;
  } catch {
    return 'unknown';
  }
}

/**
 * The settings that change what a benchmark measures: every `SLUICE_*`
 * variable but the test suites' S3 service (`SLUICE_TEST_*`, which the S3
 * benchmark may use) and the results directory.
 */
export function settingsOf(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env)
      .filter(
        (e): e is [string, string] =>
          e[0].startsWith('SLUICE_') &&
          !e[0].startsWith('SLUICE_TEST_') &&
          e[0] !== 'SLUICE_BENCH_RESULTS' &&
          e[1] !== undefined,
      )
      .sort(([a], [b]) => (a < b ? -1 : 1)),
  );
}

/** The stamp of a run starting now, but for its date (each benchmark's own end). */
export function runStamp(): Omit<Stamp, 'date'> {
  return {
    commit: commitOf(),
    node: process.version,
    machine: {
      cores: availableParallelism(),
      memoryGiB: Math.round(totalmem() / 1024 ** 3),
      cpu: cpus()[0]?.model.trim() ?? 'unknown',
      os: `${platform()} ${release()}`,
    },
    env: settingsOf(),
  };
}

/** The file of `bench` in `dir`. */
export function resultPath(bench: string, dir = RESULTS_DIR): string {
  return join(dir, `${bench}.json`);
}

/**
 * Writes one benchmark's result: the stamp first, then its targets, then
 * its other figures as it printed them.
 */
export function writeResult(
  printed: Record<string, unknown>,
  stamp: Omit<Stamp, 'date'>,
  dir = RESULTS_DIR,
): BenchResult {
  const { bench, pass, targets, exitCode, host, ...figures } = printed;
  const result = {
    bench,
    pass,
    date: new Date().toISOString(),
    ...stamp,
    exitCode,
    ...(host ? { host } : {}),
    targets,
    ...figures,
  } as BenchResult;
  mkdirSync(dir, { recursive: true });
  writeFileSync(resultPath(String(bench), dir), `${JSON.stringify(result, null, 2)}\n`);
  return result;
}

/** The results in `dir`, in run order, and the benchmarks that have none. */
export function readResults(dir = RESULTS_DIR): { results: BenchResult[]; missing: string[]; unknown: string[] } {
  const results: BenchResult[] = [];
  const missing: string[] = [];
  for (const name of BENCHMARKS) {
    const path = resultPath(name, dir);
    if (existsSync(path)) results.push(JSON.parse(readFileSync(path, 'utf8')) as BenchResult);
    else missing.push(name);
  }
  const known = new Set<string>(BENCHMARKS.map((b) => `${b}.json`));
  const unknown = existsSync(dir) ? readdirSync(dir).filter((f) => !known.has(f)) : [];
  return { results, missing, unknown };
}

const OP = { '<': '<', '<=': '≤', '>=': '≥' } as const;

function num(n: number): string {
  return String(Math.round(n * 1000) / 1000);
}

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${num(Math.round((n / 1024) * 10) / 10)} KiB`;
  return `${num(Math.round((n / 1024 ** 2) * 10) / 10)} MiB`;
}

/** A figure or bound with its unit, as the table shows it. */
export function formatValue(n: number, unit: Target['unit']): string {
  switch (unit) {
    case 'x':
      return `${num(n)}×`;
    case 'bytes':
      return bytes(n);
    case 'check':
      return n >= 1 ? 'yes' : 'no';
    case 'requests':
      return num(n);
    default:
      return `${num(n)} ${unit}`;
  }
}

/** Table cells are one line; a `|` would end the cell. */
function cell(s: string): string {
  return s.replaceAll('\n', ' ').replaceAll('|', '\\|');
}

/** The Markdown table of every target of `results`, columns padded. */
export function renderTable(results: readonly BenchResult[]): string {
  const head = ['target', 'figure', 'bound', 'status', 'date', 'commit', 'host steal / others', 'reproduce'];
  const rows = results.flatMap((r) =>
    r.targets.map((t) => [
      t.target,
      formatValue(t.figure, t.unit),
      t.unit === 'check' ? 'holds' : `${OP[t.op]} ${formatValue(t.bound, t.unit)}`,
      t.pass ? 'pass' : '**fail**',
      r.date.slice(0, 10),
      r.commit,
      r.host ? `${r.host.stealPct}% / ${r.host.othersPct}%` : '—',
      `\`npm run bench -- ${r.bench}\``,
    ]),
  );
  const lines = [head, ...rows].map((cells) => cells.map(cell));
  const widths = head.map((_, i) => Math.max(3, ...lines.map((l) => [...(l[i] ?? '')].length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => c + ' '.repeat((widths[i] ?? 0) - [...c].length)).join(' | ')} |`;
  const rule = `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`;
  return [line(lines[0] as string[]), rule, ...lines.slice(1).map(line)].join('\n');
}

/** What lies between the markers of `doc`; throws when they are missing. */
export function tableOf(doc: string): string {
  const a = doc.indexOf(BEGIN);
  const b = doc.indexOf(END);
  if (a === -1 || b < a) throw new Error(`docs/benchmarks.md has no ${BEGIN} ... ${END} section`);
  return doc.slice(a + BEGIN.length, b).trim();
}

/** `doc` with `table` between its markers. */
export function withTable(doc: string, table: string): string {
  tableOf(doc);
  const a = doc.indexOf(BEGIN) + BEGIN.length;
  return `${doc.slice(0, a)}\n${table}\n${doc.slice(doc.indexOf(END))}`;
}

/**
 * Rewrites docs/benchmarks.md's table from the results in `dir`; returns
 * the benchmarks without a results file, whose rows it cannot have.
 */
export function updateDoc(dir = RESULTS_DIR, doc = DOC): string[] {
  const { results, missing } = readResults(dir);
  const text = readFileSync(doc, 'utf8');
  const next = withTable(text, renderTable(results));
  if (next !== text) writeFileSync(doc, next);
  return missing;
}
