/**
 * `npm run build` bundles the package (generate/bundle.ts): a cold engine
 * start and its first call load sluice from the bundled entries and
 * dist/chunks/ only, in the main thread and in the worker. A file a thread
 * loads by path that is not an entry would load tsc's per-module copy
 * instead: a second instance of every class and of zod in that thread, and
 * ~100 more modules to load. How the bug shows if it returns: mostly
 * nothing fails; cold starts get slower, and `instanceof` across the copies fails.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DIST = join(ROOT, 'dist');

/** Resolve hooks (every thread that starts with `--import`) append each file URL they resolve to a log. */
const HOOKS = `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  if (r.url.startsWith('file:')) appendFileSync(process.env.SLUICE_TEST_IMPORT_LOG, r.url + '\\n');
  return r;
}
`;

describe('the bundled build', () => {
  it('a cold Engine.open and first bash call load only bundled entries and chunks, in both threads', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-bundled-start-'));
    try {
      writeFileSync(join(dir, 'hooks.mjs'), HOOKS);
      writeFileSync(
        join(dir, 'register.mjs'),
        "import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n",
      );
      const engineUrl = pathToFileURL(join(DIST, 'engine', 'engine.js')).href;
      writeFileSync(
        join(dir, 'start.mjs'),
        `const { Engine } = await import(${JSON.stringify(engineUrl)});
const engine = await Engine.open({ store: ${JSON.stringify(join(dir, 'store'))} });
const r = await engine.run('bash', { command: 'true' });
await engine.close();
process.stdout.write(r.status);
`,
      );
      const log = join(dir, 'imports.log');
      writeFileSync(log, '');
      const r = spawnSync(process.execPath, ['--import', join(dir, 'register.mjs'), join(dir, 'start.mjs')], {
        encoding: 'utf8',
        env: { ...process.env, SLUICE_TEST_IMPORT_LOG: log },
      });
      expect(r.stdout, r.stderr).toBe('success');
      const loaded = [
        ...new Set(
          readFileSync(log, 'utf8')
            .split('\n')
            .filter((u) => u.startsWith('file:'))
            .map((u) => fileURLToPath(u.replace(/\?.*$/, ''))),
        ),
      ];
      const ours = loaded.filter((p) => p.startsWith(`${DIST}/`)).map((p) => relative(DIST, p));
      // The worker's entry and the bash tool prove the hooks saw the worker thread too.
      expect(ours).toEqual(
        expect.arrayContaining(['engine/engine.js', 'workers/entry.js', 'workers/builtins/bash.js']),
      );
      const entries = new Set(['engine/engine.js', 'workers/entry.js', 'workers/builtins/bash.js']);
      expect(ours.filter((p) => !entries.has(p) && !/^chunks\/[a-z0-9-]+\.js$/.test(p))).toEqual([]);
      // A handful of files, not the ~100 modules of tsc's output.
      expect(ours.length).toBeLessThanOrEqual(16);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
