/**
 * sluice loads zod through one module, engine/protocol/zod.ts, which the build
 * replaces with a module that loads a single-file bundle of the zod package
 * (a cold thread loads it in about half the time of zod's ~95 files), compiled
 * from the V8 code cache the build writes beside it (about a third of the
 * time again). How the bugs show if they
 * return: a module importing 'zod' directly makes its thread load both copies
 * (a cold start ~50 ms slower, nothing fails); a bundle missing part of zod's
 * API breaks tool authors who use it through `sluice/tool`; a plugin bringing
 * its own zod gets a wrong or empty argument schema; a cache that V8 rejects
 * makes every cold thread compile zod again (~15-40 ms each, nothing fails).
 */
import { spawnSync } from 'node:child_process';
import { promises as fsp, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { z as packageZ } from 'zod';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const PROTOCOL = join(ROOT, 'dist', 'engine', 'protocol');
const BUILT = join(PROTOCOL, 'zod.js');
const built = readFileSync(BUILT, 'utf8');
/** `tsc` alone compiles the re-export; `npm run build` replaces it with the bundle's loader. */
const isBundle = !/from\s*['"]zod['"]/.test(built);

/** The module specifiers a compiled file imports. */
function importsOf(source: string): string[] {
  return [...source.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)["'`]([^"'`]+)["'`]/g)].map((m) => m[1] as string);
}

async function builtZod(): Promise<typeof packageZ> {
  return ((await import(pathToFileURL(BUILT).href)) as { z: typeof packageZ }).z;
}

describe('the zod sluice loads', () => {
  it.skipIf(!isBundle)('is built as one self-contained bundle, loaded by a module that imports only Node', () => {
    expect(importsOf(built)).toEqual(['node:url', './zod-cache.js']);
    expect(importsOf(readFileSync(join(PROTOCOL, 'zod-cache.js'), 'utf8')).every((s) => s.startsWith('node:'))).toBe(
      true,
    );
    const bundle = readFileSync(join(PROTOCOL, 'zod-bundle.cjs'), 'utf8');
    expect(importsOf(bundle)).toEqual([]);
    expect(bundle).not.toMatch(/\brequire\s*\(/);
    expect(bundle.length).toBeGreaterThan(100_000);
  });

  it.skipIf(!isBundle)(
    'a cold thread compiles it from the code cache the build wrote: V8 accepts it on the main thread and in a worker with the pool’s limits',
    () => {
      const url = (f: string) => JSON.stringify(pathToFileURL(join(PROTOCOL, f)).href);
      const program = `
        import { Worker, isMainThread, parentPort } from 'node:worker_threads';
        const { z } = await import(${url('zod.js')});
        const { loadedBundle } = await import(${url('zod-cache.js')});
        const accepted = loadedBundle(${JSON.stringify(join(PROTOCOL, 'zod-bundle.cjs'))})?.cacheAccepted;
        const ok = accepted === true && z.string().safeParse('x').success;
        if (!isMainThread) parentPort.postMessage(ok);
        else {
          const w = new Worker(new URL(import.meta.url), { resourceLimits: { maxOldGenerationSizeMb: 512, maxYoungGenerationSizeMb: 4 } });
          const inWorker = await new Promise((resolve) => w.once('message', resolve));
          console.log(JSON.stringify({ main: ok, worker: inWorker }));
        }`;
      return fsp.mkdtemp(join(tmpdir(), 'sluice-zod-cache-')).then(async (dir) => {
        try {
          const file = join(dir, 'probe.mjs');
          await fsp.writeFile(file, program);
          const r = spawnSync(process.execPath, [file], { encoding: 'utf8' });
          expect(r.stderr).toBe('');
          expect(JSON.parse(r.stdout.trim())).toEqual({ main: true, worker: true });
        } finally {
          await fsp.rm(dir, { recursive: true, force: true });
        }
      });
    },
  );

  it('offers exactly the API of the zod package (tool authors get it as `z` from sluice/tool)', async () => {
    const z = await builtZod();
    expect(Object.keys(z).sort()).toEqual(Object.keys(packageZ).sort());
    expect(Object.keys(z.locales).sort()).toEqual(Object.keys(packageZ.locales).sort());
  });

  it("describes and validates a schema made with the package's own zod, as for a plugin that brings its own", async () => {
    const z = await builtZod();
    const own = packageZ
      .object({ command: packageZ.string().min(1).describe('what to run'), n: packageZ.number().int().optional() })
      .strict();
    expect(z.toJSONSchema(own)).toEqual(packageZ.toJSONSchema(own));
    expect(z.toJSONSchema(own)).toMatchObject({
      properties: { command: { type: 'string', minLength: 1, description: 'what to run' } },
      required: ['command'],
      additionalProperties: false,
    });
    // Mixed: a built-copy object around package-copy fields, as `z.object({ x: theirZ.string() })` would be.
    const mixed = z.object({ inner: own });
    expect(mixed.safeParse({ inner: { command: 'ls' } }).success).toBe(true);
    const bad = mixed.safeParse({ inner: { command: '', extra: 1 } });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues.map((i) => i.path.join('.')).sort()).toEqual(['inner', 'inner.command']);
  });

  it('every module of engine/, its front ends, workers/ and store/ imports zod through engine/protocol/zod.ts', async () => {
    const shim = join(ROOT, 'engine', 'protocol', 'zod.ts');
    const offenders: string[] = [];
    for (const dir of ['engine', 'cli', 'server', 'compaction', 'workers', 'store']) {
      const files = (await fsp.readdir(join(ROOT, dir), { recursive: true }))
        .map(String)
        .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'));
      for (const f of files) {
        const path = join(ROOT, dir, f);
        if (path === shim) continue;
        const source = await fsp.readFile(path, 'utf8');
        if (/\bfrom\s*['"]zod(?:\/[^'"]*)?['"]|\bimport\s*\(\s*['"]zod/.test(source))
          offenders.push(relative(ROOT, path));
      }
    }
    expect(offenders).toEqual([]);
  });
});
