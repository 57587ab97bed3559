/**
 * `npm run build`, after tsc and generate/zod-cache.ts (run from dist/):
 * bundles the package's ES modules with rolldown, in place. Node 20 loads
 * each ES module with its own resolve, read, compile and link, ~0.5-1 ms a
 * module on this kind of machine, so a cold start that imports ~100 of
 * sluice's modules in each of two threads spends most of its time loading
 * them (docs/benchmarks.md, "Cold start").
 *
 * One build over every file that is loaded by path or exported (the
 * package's `exports`, the CLI, the files threads and processes are started
 * from): each module of sluice is in exactly one output file, so a thread
 * that loads several entries (a tool importing `sluice/tool` beside the
 * worker's entry) still has one instance of every class and of zod. The
 * entries keep their paths under dist/ (the `exports` map and the `.d.ts`
 * beside them are unchanged); the rest goes into chunks under dist/chunks/,
 * grouped by who needs them at start-up:
 *
 * - `start`: what engine.js imports statically that a worker also needs;
 *   `engine-start`: the rest of engine.js's own imports (the pool, piscina's
 *   loader), which must not reach zod: Engine.open starts the first worker
 *   before it loads the runtime.
 * - `protocol`: what engine/runtime.ts and the workers' entries share
 *   (errors, streams, zod's loader); `runtime`: the rest of the runtime.
 * - `worker`: the worker entry, the built-in tools and `sluice/tool`.
 *
 * Everything else (server, MCP, S3, farm, sessions, search, compaction) is
 * reached by dynamic imports or by other entries, and rolldown chunks it by
 * who loads it. tsc's per-module files stay in dist/ (benchmarks and
 * generators import them) but nothing the entries load reaches them.
 */
import { mkdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rolldown } from 'rolldown';

const DIST = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Files loaded by path or exported: they keep their place under dist/. */
const ENTRIES = [
  'engine/index',
  'engine/engine',
  'engine/wire/schemas',
  'store/index',
  'cli/main',
  'workers/tool',
  'workers/entry',
  'workers/builtins/bash',
  'workers/builtins/read',
  'workers/builtins/grep',
  'workers/mcp/host',
  'workers/mcp/tool',
  'workers/spawn-helper',
];

/** The start-up paths: which modules each statically needs (computed from the module graph). */
const START = {
  engine: ['engine/engine'],
  runtime: ['engine/runtime'],
  worker: ['workers/entry', 'workers/builtins/bash', 'workers/tool'],
};

const file = (name: string) => join(DIST, `${name}.js`);

/**
 * `new URL('./x', import.meta.url)` names a file beside its module, which a
 * chunk elsewhere would miss: the target's absolute path is put in at
 * transform and made relative to the chunk that ends up holding it.
 */
const SIBLING_URL = /new URL\((['"])(\.{1,2}\/[^'"]+)\1, import\.meta\.url\)/g;
const MARK = '__sluice_dist_file__:';
const MARKED = new RegExp(`new URL\\("${MARK}([^"]+)", import\\.meta\\.url\\)`, 'g');

const modules = new Map<string, { imports: readonly string[] }>();
const bundle = await rolldown({
  input: Object.fromEntries(ENTRIES.map((e) => [e, file(e)])),
  platform: 'node',
  logLevel: 'warn',
  onLog(level, log, handler) {
    // A module both imported and loaded on demand (the read path, by the read tool and a worker's artifact reads) is simply in one chunk.
    if (log.code === 'INEFFECTIVE_DYNAMIC_IMPORT') return;
    handler(level, log);
  },
  // Packages stay packages: optional peers load on demand and piscina is required as CommonJS.
  external: (id) => !id.startsWith('.') && !id.startsWith('/'),
  plugins: [
    {
      name: 'sluice-sibling-urls',
      transform(code, id) {
        if (!code.includes('import.meta.url')) return null;
        const out = code.replace(SIBLING_URL, (_m, _q, rel: string) => {
          return `new URL(${JSON.stringify(MARK + join(dirname(id), rel))}, import.meta.url)`;
        });
        return out === code ? null : { code: out };
      },
      renderChunk(code, chunk) {
        if (!code.includes(MARK)) return null;
        const from = dirname(join(DIST, chunk.fileName));
        return code.replace(MARKED, (_m, abs: string) => {
          let rel = relative(from, abs).split(sep).join('/');
          if (!rel.startsWith('.')) rel = `./${rel}`;
          return `new URL(${JSON.stringify(rel)}, import.meta.url)`;
        });
      },
      moduleParsed(info) {
        modules.set(info.id, { imports: info.importedIds });
      },
    },
  ],
});

/** Modules reached from `roots` by static imports. */
function closure(roots: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const stack = roots.map(file);
  for (let id = stack.pop(); id !== undefined; id = stack.pop()) {
    if (seen.has(id) || !modules.has(id)) continue;
    seen.add(id);
    stack.push(...(modules.get(id)?.imports ?? []));
  }
  return seen;
}

/** The start-up sets, computed once the graph is complete (rolldown builds when the output is asked for). */
let sets: Record<keyof typeof START, Set<string>> | undefined;
const group = (name: string, test: (s: NonNullable<typeof sets>, id: string) => boolean, priority: number) => ({
  name,
  test: (id: string) => {
    sets ??= { engine: closure(START.engine), runtime: closure(START.runtime), worker: closure(START.worker) };
    return test(sets, id);
  },
  priority,
});

const OUT = join(DIST, '.bundle');
rmSync(OUT, { recursive: true, force: true });
const result = await bundle.write({
  dir: OUT,
  format: 'esm',
  entryFileNames: '[name].js',
  chunkFileNames: 'chunks/[name].js',
  // Error classes and tools are told apart by name in messages and logs.
  keepNames: true,
  sourcemap: false,
  codeSplitting: {
    groups: [
      group('start', (s, id) => s.engine.has(id) && s.worker.has(id), 50),
      group('engine-start', (s, id) => s.engine.has(id), 40),
      group('protocol', (s, id) => s.runtime.has(id) && s.worker.has(id), 30),
      group('runtime', (s, id) => s.runtime.has(id), 20),
      group('worker', (s, id) => s.worker.has(id), 10),
    ],
  },
});
await bundle.close();

rmSync(join(DIST, 'chunks'), { recursive: true, force: true });
for (const out of result.output) {
  if (out.type !== 'chunk') continue;
  const to = join(DIST, out.fileName);
  mkdirSync(dirname(to), { recursive: true });
  renameSync(join(OUT, out.fileName), to);
}
rmSync(OUT, { recursive: true, force: true });
