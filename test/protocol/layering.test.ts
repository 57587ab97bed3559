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
 * - the generators (generate/) are imported by nothing that ships.
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
});
