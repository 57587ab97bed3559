/**
 * `npm run build` (last step, run from dist/ after rolldown has written
 * `dist/engine/protocol/zod-bundle.cjs`): replaces the compiled
 * `dist/engine/protocol/zod.js` (a plain re-export of the zod package) with a
 * module that loads the bundle through engine/protocol/zod-cache.ts, then
 * writes the bundle's V8 code cache, `zod-bundle.cache`.
 *
 * The cache is taken after sluice's own schemas have been built and used
 * (the wire and option schemas, the built-in tools' arguments, a describe):
 * V8 caches the functions compiled by then, so a cold thread that does the
 * same compiles almost nothing of zod itself.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { z as Z } from '../engine/protocol/zod.js';

const PROTOCOL = join(dirname(fileURLToPath(import.meta.url)), '..', 'engine', 'protocol');
const BUNDLE = join(PROTOCOL, 'zod-bundle.cjs');
const CACHE = join(PROTOCOL, 'zod-bundle.cache');

/** The module that replaces the compiled re-export: the same `z`, from the bundle and its cache. */
const LOADER = `// Written by \`npm run build\` (generate/zod-cache.ts): zod from one bundled file, compiled from V8's code cache.
import { fileURLToPath } from 'node:url';
import { loadCachedBundle } from './zod-cache.js';

export const { z } = loadCachedBundle(
  fileURLToPath(new URL('./zod-bundle.cjs', import.meta.url)),
  fileURLToPath(new URL('./zod-bundle.cache', import.meta.url)),
).exports;
`;

// A stale cache would be rejected anyway (V8 checks the source); the new one is written from scratch.
rmSync(CACHE, { force: true });
writeFileSync(join(PROTOCOL, 'zod.js'), LOADER);

const load = (path: string) => import(pathToFileURL(join(PROTOCOL, '..', '..', path)).href);
const { z } = (await load('engine/protocol/zod.js')) as typeof import('../engine/protocol/zod.js');
// What a cold thread builds and runs: the main thread's option and wire schemas, a worker's tool
// declarations, argument parsing and describing.
const { resolveOptions } = (await load('engine/options.js')) as typeof import('../engine/options.js');
await load('engine/wire/schemas.js');
resolveOptions({}, { concurrency: 16, cwd: process.cwd(), storeRoot: process.cwd() });
for (const name of ['bash', 'read', 'grep']) {
  const tool = (await load(`workers/builtins/${name}.js`)).default as { args: Z.ZodType };
  tool.args.safeParse({ command: 'true', path: '/', pattern: 'x' });
  tool.args.safeParse({});
  z.toJSONSchema(tool.args);
}

const { loadedBundle } = (await load(
  'engine/protocol/zod-cache.js',
)) as typeof import('../engine/protocol/zod-cache.js');
const bundle = loadedBundle(BUNDLE);
if (!bundle) throw new Error(`${BUNDLE} was not loaded through the cache loader`);
writeFileSync(CACHE, bundle.script.createCachedData());
