/**
 * Where the sluice package lives, found once by walking up to the
 * `package.json` named `sluice`: the engine runs from its sources (under
 * vitest) and from dist/, one directory deeper, so a `../` count per caller
 * would be right for one layout only.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let root: { dir: string; version: string } | null | undefined;

function find(): { dir: string; version: string } | null {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'sluice') return { dir, version: String(pkg.version ?? 'unknown') };
    } catch {
      // Not here, or not readable: keep walking up.
    }
    const up = dirname(dir);
    if (up === dir) return null;
    dir = up;
  }
}

/** The package's directory (the one holding its package.json, dist/ and docs/). */
export function packageRoot(): string {
  if (root === undefined) root = find();
  if (!root) throw new Error(`sluice's package.json was not found above ${fileURLToPath(import.meta.url)}`);
  return root.dir;
}

/** The package's version, from its package.json; `unknown` when that cannot be read. */
export function packageVersion(): string {
  if (root === undefined) root = find();
  return root?.version ?? 'unknown';
}
