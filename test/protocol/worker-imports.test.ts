/**
 * What a starting worker loads before its first call is on the critical path
 * of every engine's first call (docs/benchmarks.md, "Cold start"). messages.ts
 * builds the wire schemas when it loads (~10 ms of zod per worker), and only
 * the main thread uses them, so the worker's start path takes values from
 * the light limits.ts and port.ts and only types from messages.ts; and it
 * loads comlink (rpc.ts) only when a tool first asks the host, which a bash
 * call under the default approval policy never does. How the bug shows if it
 * returns: nothing fails; every worker boots ~8-10 ms slower.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Modules `file` imports for their values (static imports and re-exports; `import type` and `import()` excluded). */
function valueImports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  const pattern = /^(?:import|export)\s+(?!type\b)(?:[^;'"]*?\bfrom\s+)?['"]([^'"]+)['"]/gm;
  for (const m of text.matchAll(pattern)) {
    const spec = m[1] as string;
    if (!spec.startsWith('.')) continue;
    out.push(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
  }
  return out;
}

/** Every module reachable from `entries` through value imports, relative to the repository. */
function reachable(entries: string[]): Set<string> {
  const seen = new Set<string>();
  const todo = entries.map((e) => join(ROOT, e));
  for (let file = todo.pop(); file !== undefined; file = todo.pop()) {
    const rel = relative(ROOT, file);
    if (seen.has(rel)) continue;
    seen.add(rel);
    todo.push(...valueImports(file));
  }
  return seen;
}

describe('a starting worker', () => {
  it('reaches neither the message schemas nor the wire schemas before its first bash call', () => {
    const graph = reachable(['workers/entry.ts', 'workers/builtins/bash.ts']);
    // The walk is real: it finds the modules the worker does load.
    expect(graph).toContain('workers/context.ts');
    expect(graph).toContain('engine/protocol/limits.ts');
    expect(graph).toContain('engine/protocol/port.ts');
    expect(graph).toContain('engine/protocol/zod.ts');
    expect([...graph].filter((f) => /^engine\/(protocol\/messages\.ts|wire\/)/.test(f))).toEqual([]);
  });

  it('loads comlink only when a tool first asks the host', () => {
    const graph = reachable(['workers/entry.ts', 'workers/builtins/bash.ts']);
    expect(graph).toContain('engine/protocol/call-endpoint.ts');
    expect(graph).not.toContain('engine/protocol/rpc.ts');
    // The walk follows relative imports only: comlink itself is reached through rpc.ts alone.
    const importers = [...graph].filter((f) =>
      /from ['"]comlink['"]/.test(readFileSync(join(ROOT, f), 'utf8').replace(/^import type .*$/gm, '')),
    );
    expect(importers).toEqual([]);
  });
});

describe('Engine.open', () => {
  it('reaches no zod before it has started the first worker (engine.ts loads the rest through runtime.ts)', () => {
    // Regression: the sandbox policy, imported by engine.ts, brought zod (~30 ms) ahead of the pool.
    const graph = reachable(['engine/engine.ts']);
    expect(graph).toContain('engine/pool/pool.ts');
    expect(graph).toContain('engine/processes/watchdog.ts');
    expect(graph).not.toContain('engine/protocol/zod.ts');
    expect(graph).not.toContain('engine/runtime.ts');
  });

  it('sluice run, mcp and tools reach no zod before they open their engine (a --config file loads its schemas itself)', () => {
    const graph = reachable(['cli/main.ts', 'cli/run.ts', 'cli/mcp.ts', 'cli/tools.ts']);
    expect(graph).toContain('cli/config.ts');
    expect(graph).not.toContain('cli/config-file.ts');
    expect(graph).not.toContain('engine/protocol/zod.ts');
  });
});
