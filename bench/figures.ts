/**
 * `npm run bench:doc` (`node dist/bench/figures.js`): rewrites the table
 * between `<!-- figures:begin -->` and `<!-- figures:end -->` in
 * docs/benchmarks.md from bench/results/*.json (bench/results.ts). `--check`
 * rewrites nothing and exits 1 when the table differs. Either way it exits
 * 1 while a benchmark of `npm run bench` has no results file, naming it.
 */
import { readFileSync } from 'node:fs';
import { DOC, readResults, renderTable, tableOf, updateDoc } from './results.js';

const checkOnly = process.argv.includes('--check');
let missing: string[];
if (checkOnly) {
  const r = readResults();
  missing = r.missing;
  if (tableOf(readFileSync(DOC, 'utf8')) !== renderTable(r.results)) {
    process.stderr.write('docs/benchmarks.md: the figures table differs from bench/results; run npm run bench:doc\n');
    process.exitCode = 1;
  }
} else {
  missing = updateDoc();
}
if (missing.length > 0) {
  process.stderr.write(
    `no results file for ${missing.join(', ')}: run ${missing.map((m) => `npm run bench -- ${m}`).join('; ')}\n`,
  );
  process.exitCode = 1;
}
