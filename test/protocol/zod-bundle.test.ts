/**
 * sluice loads zod through one module, engine/protocol/zod.ts, which the build
 * replaces with a single-file bundle of the zod package (a cold thread loads
 * it in about half the time of zod's ~95 files). How the bugs show if they
 * return: a module importing 'zod' directly makes its thread load both copies
 * (a cold start ~50 ms slower, nothing fails); a bundle missing part of zod's
 * API breaks tool authors who use it through `sluice/tool`; a plugin bringing
 * its own zod gets a wrong or empty argument schema.
 */
import { promises as fsp, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { z as packageZ } from 'zod';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BUILT = join(ROOT, 'dist', 'engine', 'protocol', 'zod.js');
const built = readFileSync(BUILT, 'utf8');
/** `tsc` alone compiles the re-export; `npm run build` replaces it with the bundle. */
const isBundle = !/from\s*['"]zod['"]/.test(built);

async function builtZod(): Promise<typeof packageZ> {
  return ((await import(pathToFileURL(BUILT).href)) as { z: typeof packageZ }).z;
}

describe('the zod sluice loads', () => {
  it.skipIf(!isBundle)('is built as one self-contained file: it imports no module at all', () => {
    const specifiers = [...built.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)["'`]([^"'`]+)["'`]/g)].map((m) => m[1]);
    expect(specifiers).toEqual([]);
    expect(built.length).toBeGreaterThan(100_000);
  });

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

  it('every module of engine/, workers/ and store/ imports zod through engine/protocol/zod.ts', async () => {
    const shim = join(ROOT, 'engine', 'protocol', 'zod.ts');
    const offenders: string[] = [];
    for (const dir of ['engine', 'workers', 'store']) {
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
