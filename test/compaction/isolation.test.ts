/**
 * Rules 6 and 7 by construction: compaction cannot store the omission marker
 * or record the private retry anywhere, because nothing it loads (directly or
 * transitively) can reach a store, the filesystem, a process or the network.
 * If someone wires a store or a log into compaction/, this fails.
 */
import { promises as fsp } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const IMPORT = /^\s*(?:import|export)\s[^;]*?from\s+'([^']+)'/gms;

/** Every module reachable from `entry` through relative imports, and every bare specifier they use. */
async function closure(entries: string[]): Promise<{ files: string[]; external: string[] }> {
  const files = new Set<string>();
  const external = new Set<string>();
  const queue = [...entries];
  while (queue.length > 0) {
    const file = queue.pop() as string;
    if (files.has(file)) continue;
    files.add(file);
    const source = await fsp.readFile(file, 'utf8');
    for (const m of source.matchAll(IMPORT)) {
      const spec = m[1] as string;
      if (spec.startsWith('.')) queue.push(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
      else external.add(spec);
    }
  }
  return { files: [...files].map((f) => relative(ROOT, f)).sort(), external: [...external].sort() };
}

describe('compaction is pure main-thread code', () => {
  it('reaches no store, filesystem, process or network module', async () => {
    const dir = join(ROOT, 'compaction');
    const entries = (await fsp.readdir(dir)).filter((f) => f.endsWith('.ts')).map((f) => join(dir, f));
    const { files, external } = await closure(entries);
    expect(external).toEqual(['zod']);
    expect(files.filter((f) => f.startsWith('store/'))).toEqual(['store/uri.ts']);
    expect(
      files.every(
        (f) =>
          f.startsWith('compaction/') ||
          f.startsWith('engine/protocol/') ||
          f === 'engine/result.ts' ||
          f === 'store/uri.ts',
      ),
    ).toBe(true);
    for (const f of files) {
      const source = await fsp.readFile(join(ROOT, f), 'utf8');
      expect(source, f).not.toMatch(/\brequire\(|\bimport\(|process\.(?:stdout|stderr)|writeFile|appendFile/);
    }
  });
});
