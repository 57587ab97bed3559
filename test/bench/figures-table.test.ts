/**
 * docs/benchmarks.md's figures table is generated from the committed
 * results of `npm run bench` (bench/results/<name>.json, bench/results.ts),
 * so it cannot drift from them: after a benchmark run, commit its results
 * file with the table `npm run bench` rewrote (or `npm run bench:doc`).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  BENCHMARKS,
  DOC,
  ROOT,
  readResults,
  renderTable,
  resultPath,
  settingsOf,
  tableOf,
  withTable,
} from '../../bench/results.js';
import { check, passes, target } from '../../bench/targets.js';

describe('the committed benchmark results', () => {
  it('every benchmark npm run bench runs has a results file, and no other benchmark has one', () => {
    const { missing, unknown } = readResults();
    expect(missing, `run npm run bench -- ${missing.join(' ')} and commit bench/results`).toEqual([]);
    expect(unknown).toEqual([]);
  });

  it('every program in bench/ that reports a result is one npm run bench runs', () => {
    const reporting = readdirSync(join(ROOT, 'bench'))
      .filter((f) => f.endsWith('.ts'))
      .filter((f) => /^\s*(?:await\s+)?report(?:Parts)?\(/m.test(readFileSync(join(ROOT, 'bench', f), 'utf8')))
      .map((f) => f.replace(/\.ts$/, ''));
    expect(reporting.sort()).toEqual([...BENCHMARKS].sort());
  });

  it('docs/benchmarks.md has the table bench/figures.ts generates from them', () => {
    const doc = readFileSync(DOC, 'utf8');
    expect(tableOf(doc), 'run npm run bench:doc').toBe(renderTable(readResults().results));
  });

  const { results } = readResults();
  it.each(results.map((r) => [r.bench, r] as const))('%s: measured at the defaults, stamped, small', (name, r) => {
    expect(r.bench).toBe(name);
    // Reduced sizes or other settings (SLUICE_BENCH_BYTES=..., SLUICE_SPAWN_HELPER=0) are not the figures.
    expect(r.env).toEqual({});
    expect(r.date).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    // Committed figures name a commit that holds the code measured: never a dirty tree.
    expect(r.commit).toMatch(/^[0-9a-f]{7,}$/);
    expect(r.node).toMatch(/^v\d+\./);
    expect(r.machine.cores).toBeGreaterThan(0);
    expect(r.exitCode).toBe(0);
    expect(r.targets.length).toBeGreaterThan(0);
    for (const t of r.targets) expect(t.id.startsWith(`${name}.`), t.id).toBe(true);
    expect(new Set(r.targets.map((t) => t.id)).size).toBe(r.targets.length);
    expect(r.pass).toBe(passes(r.targets));
    expect(statSync(resultPath(name)).size).toBeLessThan(8 * 1024);
  });
});

describe('the figures table', () => {
  const stamp = {
    date: '2026-01-02T03:04:05.678Z',
    commit: 'abc1234',
    node: 'v20.0.0',
    machine: { cores: 2, memoryGiB: 4, cpu: 'x', os: 'linux' },
    env: {},
    exitCode: 0,
  };

  it('has a row per target with its figure, bound, status, date, commit, host and command', () => {
    const table = renderTable([
      {
        ...stamp,
        bench: 'capture',
        pass: false,
        host: { stealPct: 0.2, othersPct: 6.1, load1Start: 1, load1End: 1 },
        targets: [
          target('capture.disk', 'throughput ≥ 0.6× producer | dd', 0.5554, '>=', 0.6, 'x', 3),
          check('capture.digests', 'digests equal', true),
        ],
      },
      {
        ...stamp,
        bench: 'read-pages',
        pass: true,
        targets: [target('read-pages.m', 'growth', 3000, '<=', 2e6, 'bytes')],
      },
    ]);
    const lines = table.split('\n').map((l) => l.replace(/ +/g, ' '));
    expect(lines[0]).toBe('| target | figure | bound | status | date | commit | host steal / others | reproduce |');
    expect(lines[2]).toBe(
      '| throughput ≥ 0.6× producer \\| dd | 0.555× | ≥ 0.6× | **fail** | 2026-01-02 | abc1234 | 0.2% / 6.1% | `npm run bench -- capture` |',
    );
    expect(lines[3]).toBe(
      '| digests equal | yes | holds | pass | 2026-01-02 | abc1234 | 0.2% / 6.1% | `npm run bench -- capture` |',
    );
    expect(lines[4]).toBe(
      '| growth | 2.9 KiB | ≤ 1.9 MiB | pass | 2026-01-02 | abc1234 | — | `npm run bench -- read-pages` |',
    );
    // Padded: every line as long as the first.
    expect(new Set(table.split('\n').map((l) => [...l].length)).size).toBe(1);
  });

  it('goes between the markers, leaving the rest of the document', () => {
    const doc = 'a\n<!-- figures:begin -->\nold\n<!-- figures:end -->\nb\n';
    expect(withTable(doc, '| t |')).toBe('a\n<!-- figures:begin -->\n| t |\n<!-- figures:end -->\nb\n');
    expect(() => withTable('no markers', '| t |')).toThrow(/figures:begin/);
  });

  it('a target passes on the unrounded figure', () => {
    expect(target('x.y', 't', 299.6, '<', 300, 'ms', 0)).toMatchObject({ figure: 300, pass: true });
    expect(target('x.y', 't', 0.8999, '>=', 0.9, 'x', 2)).toMatchObject({ figure: 0.9, pass: false });
  });

  it('counts every SLUICE_ setting as one but the S3 service and the results directory', () => {
    expect(
      settingsOf({ SLUICE_BENCH_BYTES: '1', SLUICE_TEST_S3_ENDPOINT: 'h', SLUICE_BENCH_RESULTS: '/d', HOME: '/' }),
    ).toEqual({ SLUICE_BENCH_BYTES: '1' });
  });
});
