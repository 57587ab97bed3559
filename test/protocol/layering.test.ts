/**
 * The layering rules of docs/architecture.md, "Layout", read from the
 * sources (every import: static, type-only, side-effect and dynamic):
 *
 * - the shared protocol (engine/protocol/) is a leaf: it imports nothing of
 *   sluice outside itself;
 * - workers/ imports nothing of engine/ but the protocol (it may use store/,
 *   whose pages the read tool serves);
 * - store/ imports nothing of engine/ but the protocol, and nothing of
 *   workers/;
 * - the library (engine/) imports none of its front ends (cli/, server/) or
 *   compaction/, except engine/index.ts, the package root that exports the
 *   server and compaction with the rest of the API; workers/ and store/
 *   import none of them either; the server does not import the CLI;
 * - the generators (generate/) are imported by nothing that ships;
 * - the static imports among store/ files that load at run time (not
 *   `import type`, not `import()`) form no cycle, and nothing that ships
 *   reaches store/s3/ that way from outside it: a directory store never
 *   loads the S3 backend, which store/store.ts imports dynamically for an
 *   S3 store.
 */
import { promises as fsp } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Every import or export-from specifier of a TypeScript source (static, dynamic and type-only). */
function importSpecifiers(source: string): string[] {
  const specs: string[] = [];
  const patterns = [
    /\b(?:import|export)\s+(?:type\s+)?[^'";]*?\sfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g,
    /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const re of patterns) for (const m of source.matchAll(re)) specs.push(m[1] as string);
  return specs;
}

/** `from imports spec` for every relative import of a source under `dir` (repository-relative paths). */
async function importsUnder(dir: string): Promise<Array<{ from: string; to: string; spec: string }>> {
  const base = join(ROOT, dir);
  const files = (await fsp.readdir(base, { recursive: true }))
    .map(String)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'));
  const out: Array<{ from: string; to: string; spec: string }> = [];
  for (const f of files) {
    const path = join(base, f);
    for (const spec of importSpecifiers(await fsp.readFile(path, 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      out.push({ from: relative(ROOT, path), to: relative(ROOT, resolve(dirname(path), spec)), spec });
    }
  }
  expect(files.length, `${dir} has sources`).toBeGreaterThan(3);
  return out;
}

/**
 * The relative specifiers a source loads when it is evaluated: static imports
 * and re-exports, side-effect imports included, but not `import type` /
 * `export type` (erased) and not `import()` (loaded on demand).
 */
function runtimeSpecifiers(source: string): string[] {
  const specs: string[] = [];
  const patterns = [
    /^\s*(?:import|export)\s+(?!type\s)[^'";]*?\sfrom\s*['"]([^'"]+)['"]/gm,
    /^\s*import\s*['"]([^'"]+)['"]/gm,
  ];
  for (const re of patterns) for (const m of source.matchAll(re)) specs.push(m[1] as string);
  return specs.filter((s) => s.startsWith('.'));
}

/** The run-time import graph of the sources under `dir` (repository-relative `.ts` paths). */
async function runtimeGraph(dir: string): Promise<Map<string, string[]>> {
  const base = join(ROOT, dir);
  const files = (await fsp.readdir(base, { recursive: true }))
    .map(String)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'));
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const path = join(base, f);
    const to = runtimeSpecifiers(await fsp.readFile(path, 'utf8')).map((spec) =>
      relative(ROOT, resolve(dirname(path), spec)).replace(/\.js$/, '.ts'),
    );
    graph.set(relative(ROOT, path), to);
  }
  return graph;
}

/** The strongly connected components of `graph` with more than one file, or a file importing itself (Tarjan). */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop() as string;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)?.includes(v)) out.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return out;
}

const inside = (path: string, dir: string) => path === dir || path.startsWith(`${dir}/`);
const offenders = (edges: Array<{ from: string; to: string; spec: string }>, bad: (to: string) => boolean) =>
  edges.filter((e) => bad(e.to)).map((e) => `${e.from} imports ${e.spec}`);

describe('layering', () => {
  it('the import scanner finds static, type-only, side-effect and dynamic imports', () => {
    const src = [
      "import { a } from '../engine/call.js';",
      "import type { B } from '../engine/result.js';",
      "export { c } from '../engine/pool.js';",
      "import '../engine/capture.js';",
      "const m = await import('../engine/engine.js');",
      'import {\n  d,\n  e,\n} from "../engine/registry.js";',
    ].join('\n');
    expect(importSpecifiers(src).sort()).toEqual(
      [
        '../engine/call.js',
        '../engine/result.js',
        '../engine/pool.js',
        '../engine/capture.js',
        '../engine/engine.js',
        '../engine/registry.js',
      ].sort(),
    );
  });

  it('the shared protocol imports nothing of sluice outside itself', async () => {
    const edges = await importsUnder('engine/protocol');
    expect(offenders(edges, (to) => !inside(to, 'engine/protocol'))).toEqual([]);
  });

  it('workers/ imports nothing of engine/ except the protocol', async () => {
    const edges = await importsUnder('workers');
    expect(edges.some((e) => inside(e.to, 'engine/protocol'))).toBe(true);
    expect(offenders(edges, (to) => inside(to, 'engine') && !inside(to, 'engine/protocol'))).toEqual([]);
  });

  it('store/ imports nothing of engine/ except the protocol, and nothing of workers/', async () => {
    const edges = await importsUnder('store');
    expect(edges.some((e) => inside(e.to, 'engine/protocol'))).toBe(true);
    const bad = (to: string) => (inside(to, 'engine') && !inside(to, 'engine/protocol')) || inside(to, 'workers');
    expect(offenders(edges, bad)).toEqual([]);
  });

  it('the library imports none of its front ends, and the server not the CLI', async () => {
    const front = (to: string) => inside(to, 'cli') || inside(to, 'server') || inside(to, 'compaction');
    const library = (await importsUnder('engine')).filter((e) => e.from !== 'engine/index.ts');
    expect(library.length).toBeGreaterThan(100);
    expect(offenders(library, front)).toEqual([]);
    expect(offenders([...(await importsUnder('workers')), ...(await importsUnder('store'))], front)).toEqual([]);
    expect(offenders(await importsUnder('server'), (to) => inside(to, 'cli'))).toEqual([]);
    expect(offenders(await importsUnder('compaction'), (to) => inside(to, 'cli') || inside(to, 'server'))).toEqual([]);
  });

  it('nothing that ships imports the generators', async () => {
    const edges = [
      ...(await importsUnder('engine')),
      ...(await importsUnder('cli')),
      ...(await importsUnder('server')),
      ...(await importsUnder('compaction')),
      ...(await importsUnder('workers')),
      ...(await importsUnder('store')),
    ];
    const shipped = edges.filter((e) => !inside(e.from, 'generate'));
    expect(offenders(shipped, (to) => inside(to, 'generate'))).toEqual([]);
  });

  it('the cycle finder finds a cycle and ignores type-only and dynamic imports', () => {
    expect(
      runtimeSpecifiers(
        [
          "import { a } from './a.js';",
          "import type { B } from './b.js';",
          "export type { C } from './c.js';",
          "import { type D } from './d.js';",
          "const e = await import('./e.js');",
          "import './f.js';",
        ].join('\n'),
      ),
    ).toEqual(['./a.js', './d.js', './f.js']);
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a', 'd']],
      ['d', []],
    ]);
    expect(cycles(graph)).toEqual([['a', 'b', 'c']]);
    expect(cycles(new Map([['a', ['a']]]))).toEqual([['a']]);
  });

  it('store/ has no import cycle, and only store/s3/ loads store/s3/', async () => {
    const graph = await runtimeGraph('store');
    expect(graph.size).toBeGreaterThan(40);
    expect(cycles(graph)).toEqual([]);
    const shipped = [graph, ...(await Promise.all(['engine', 'server', 'cli', 'workers'].map(runtimeGraph)))];
    const reachesS3 = shipped
      .flatMap((g) => [...g])
      .flatMap(([from, to]) =>
        inside(from, 'store/s3') ? [] : to.filter((t) => inside(t, 'store/s3')).map((t) => `${from} imports ${t}`),
      );
    expect(reachesS3).toEqual([]);
  });
});
