/**
 * The published tarball holds what users run and nothing else: the compiled
 * engine, workers and store, the web view's built page (no benchmarks, no generators, no source maps
 * pointing at sources it does not ship), the CommonJS entry, the docs with
 * the JSON Schema and the OpenAPI document, the Python spawn helper, README and LICENSE; and its
 * package.json runs nothing on install.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE, type PackedFile, packedFiles, ROOT } from './pack.js';

/** Every file the tarball may hold: one pattern must match each. */
const ALLOWED: readonly RegExp[] = [
  /^package\.json$/,
  /^README\.md$/,
  /^LICENSE$/,
  /^cjs\/index\.cjs$/,
  /^dist\/(engine|cli|server|compaction|workers|store)\/([a-z0-9-]+\/)*[a-z0-9-]+\.(js|d\.ts)$/,
  /^dist\/web\/(index\.html|app\.js|app\.css|icon\.svg)$/,
  // What the bundled entries share (generate/bundle.ts).
  /^dist\/chunks\/[a-z0-9-]+\.js$/,
  // zod as one CommonJS bundle and its V8 code cache (engine/protocol/zod-cache.ts).
  /^dist\/engine\/protocol\/zod-bundle\.(cjs|cache)$/,
  // The CommonJS file piscina requires in each thread (workers/entry-loader.cts).
  /^dist\/workers\/entry-loader\.(cjs|d\.cts)$/,
  // The posix_spawn spawn helper, run by a system Python (workers/spawner.ts).
  /^dist\/workers\/spawn-helper\.py$/,
  /^docs\/[a-z-]+\.md$/,
  /^docs\/schema\/sluice-protocol\.json$/,
  /^docs\/schema\/openapi\.json$/,
];

/** What must never ship, whatever the patterns above would let through. */
const FORBIDDEN: readonly RegExp[] = [/\.map$/, /^dist\/bench\//, /^dist\/engine\/generate\//, /^test\//, /\.ts$/];

describe('the published tarball', () => {
  let files: PackedFile[];
  beforeAll(async () => {
    files = await packedFiles();
  });

  it('holds only allowlisted files, and none that must never ship', () => {
    const paths = files.map((f) => f.path);
    expect(paths.filter((p) => !ALLOWED.some((re) => re.test(p)))).toEqual([]);
    expect(paths.filter((p) => !p.endsWith('.d.ts') && FORBIDDEN.some((re) => re.test(p)))).toEqual([]);
    expect(paths.filter((p) => p.endsWith('.js.map') || p.endsWith('.d.ts.map'))).toEqual([]);
  });

  it('ships the MIT LICENSE naming the project, the CLI and the target of every export', () => {
    const paths = new Set(files.map((f) => f.path));
    expect(paths.has('LICENSE')).toBe(true);
    const license = readFileSync(join(ROOT, 'LICENSE'), 'utf8');
    expect(license.startsWith('MIT License\n')).toBe(true);
    expect(license).toContain('The sluice authors');
    expect(PACKAGE.bin.sluice).toBe('dist/cli/main.js');
    expect(paths.has('dist/cli/main.js')).toBe(true);
    const targets = Object.values(PACKAGE.exports).flatMap((t) => (typeof t === 'string' ? [t] : Object.values(t)));
    expect(targets.length).toBeGreaterThan(8);
    for (const t of targets) expect(paths.has(t.replace(/^\.\//, '')), t).toBe(true);
    expect(PACKAGE.exports['./schema']).toBe('./docs/schema/sluice-protocol.json');
    expect(PACKAGE.exports['./openapi']).toBe('./docs/schema/openapi.json');
    // The web view, built at package time: `sluice serve` serves it from here.
    for (const f of ['index.html', 'app.js', 'app.css', 'icon.svg']) expect(paths.has(`dist/web/${f}`), f).toBe(true);
    expect(paths.has('dist/workers/entry-loader.cjs')).toBe(true);
    // Both spawn helpers: without the Python one every spawn would fork a Node (slower, never wrong).
    for (const f of ['spawn-helper.js', 'spawn-helper.py']) expect(paths.has(`dist/workers/${f}`), f).toBe(true);
  });

  it('no compiled file points at a source map, since none is shipped', () => {
    for (const f of files.filter((x) => /\.c?js$/.test(x.path))) {
      const text = readFileSync(join(ROOT, f.path), 'utf8');
      expect(text.includes('sourceMappingURL'), f.path).toBe(false);
    }
  });

  it('runs no script on install (no prepare/preinstall/install/postinstall warning for installers)', () => {
    for (const s of ['prepare', 'preinstall', 'install', 'postinstall']) expect(PACKAGE.scripts[s], s).toBeUndefined();
    expect(PACKAGE.scripts.prepack).toBe('npm run build');
  });

  it('declares the Node.js versions where both import and require work', () => {
    // require(esm) is on by default from 20.19; the README says the same.
    expect(PACKAGE.engines.node).toBe('>=20.19');
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme).toContain('Node.js 20.19');
    expect(readme).toContain('Linux');
  });
});
