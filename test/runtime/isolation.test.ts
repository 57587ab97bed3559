/**
 * Thread boundaries: the main thread never evaluates tool code (registration
 * reads the declaration through a worker), and workers/ imports nothing from
 * engine/ except engine/protocol/.
 */
import { promises as fsp } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { closeEngines, engineWith, singleText } from './helpers.js';

afterEach(closeEngines);

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

describe('tool code stays in workers', () => {
  it('registering and calling a tool never evaluates its module on the main thread', async () => {
    const g = globalThis as { __sluiceMarkerLoaded?: number };
    expect(g.__sluiceMarkerLoaded).toBeUndefined();
    const { engine } = await engineWith(['marker']);
    const info = engine.tools().find((t) => t.name === 'marker');
    expect(info).toMatchObject({ output: { kind: 'single' }, source: 'plugin' });
    const r = await engine.run('marker', {});
    expect(r.status).toBe('success');
    // The module refuses to load on a main thread, so success already proves it; the marker says so twice.
    expect(await singleText(engine, r)).toMatch(/^isMainThread=false loads=1\n$/);
    expect(g.__sluiceMarkerLoaded).toBeUndefined();
  });
});

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

describe('import boundary', () => {
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

  it('workers/ imports nothing from engine/ except engine/protocol/', async () => {
    const workers = join(ROOT, 'workers');
    const files = (await fsp.readdir(workers, { recursive: true }))
      .map(String)
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'));
    expect(files.length).toBeGreaterThan(5);
    const engineDir = join(ROOT, 'engine');
    const protocolDir = join(engineDir, 'protocol');
    const offenders: string[] = [];
    for (const f of files) {
      const path = join(workers, f);
      for (const spec of importSpecifiers(await fsp.readFile(path, 'utf8'))) {
        if (!spec.startsWith('.')) continue;
        const target = resolve(dirname(path), spec);
        const inEngine = !relative(engineDir, target).startsWith('..');
        const inProtocol = !relative(protocolDir, target).startsWith('..');
        if (inEngine && !inProtocol) offenders.push(`${relative(ROOT, path)} imports ${spec}`);
      }
    }
    expect(offenders).toEqual([]);
  });
});
