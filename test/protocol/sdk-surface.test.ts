/**
 * The public API is documented: every name exported by the package's entry
 * points (`sluice`, `sluice/tool`, `sluice/store`, `sluice/protocol`) has a
 * TSDoc comment on its declaration, and so does every member of the types an
 * embedder handles most. Checked on the emitted declarations in dist/ (the
 * build keeps comments), following re-exports to where each name is declared.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DIST = join(ROOT, 'dist');

/** The package's entry points, from package.json exports. */
function entryPoints(): string[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    exports: Record<string, { types?: string } | string>;
  };
  return Object.values(pkg.exports)
    .flatMap((e) => (typeof e === 'object' && e.types ? [join(ROOT, e.types)] : []))
    .sort();
}

/** Names a .d.ts declares, each with whether a doc comment precedes it. */
function declarations(file: string): Map<string, boolean> {
  const lines = readFileSync(file, 'utf8').split('\n');
  const out = new Map<string, boolean>();
  lines.forEach((l, i) => {
    const m =
      /^(?:export )?(?:declare )?(?:abstract )?(?:function|class|interface|type|const|let|enum) ([A-Za-z_$][\w$]*)/.exec(
        l,
      );
    if (m) out.set(m[1] as string, (lines[i - 1] ?? '').trim().endsWith('*/'));
  });
  return out;
}

/** Names a .d.ts re-exports: name → [file, name there]. */
function reexports(file: string): Map<string, [string, string]> {
  const text = readFileSync(file, 'utf8');
  const out = new Map<string, [string, string]>();
  for (const m of text.matchAll(/export (?:type )?\{([^}]*)\} from '([^']+)\.js'/g)) {
    const target = resolve(dirname(file), `${m[2]}.d.ts`);
    for (const part of (m[1] as string).split(',').map((s) => s.trim().replace(/^type /, ''))) {
      if (!part) continue;
      const [orig, alias] = part.split(/\s+as\s+/) as [string, string | undefined];
      out.set(alias ?? orig, [target, orig]);
    }
  }
  // Local lists: `export { a as b };` names a declaration of the same file.
  for (const m of text.matchAll(/export \{([^}]*)\};/g)) {
    for (const part of (m[1] as string).split(',').map((s) => s.trim())) {
      if (!part) continue;
      const [orig, alias] = part.split(/\s+as\s+/) as [string, string | undefined];
      out.set(alias ?? orig, [file, orig]);
    }
  }
  for (const m of text.matchAll(/export \* from '([^']+)\.js'/g)) {
    const target = resolve(dirname(file), `${m[1]}.d.ts`);
    for (const name of declarations(target).keys()) out.set(name, [target, name]);
  }
  return out;
}

function documented(file: string, name: string, depth = 0): boolean | 'missing' {
  const own = declarations(file).get(name);
  if (own !== undefined) return own;
  // Re-exported from a dependency (`sluice/tool` re-exports zod's `z`): documented there.
  const fromPackage = new RegExp(`import \\{[^}]*\\b${name}\\b[^}]*\\} from '[^.]`);
  if (fromPackage.test(readFileSync(file, 'utf8'))) return true;
  const next = reexports(file).get(name);
  return next && depth < 10 ? documented(next[0], next[1], depth + 1) : 'missing';
}

describe('the public API is documented', () => {
  it('every exported name of every entry point has TSDoc', () => {
    const entries = entryPoints();
    expect(entries.map((e) => e.slice(DIST.length + 1))).toEqual([
      'engine/engine.d.ts',
      'engine/index.d.ts',
      'engine/wire/schemas.d.ts',
      'store/index.d.ts',
      'workers/tool.d.ts',
    ]);
    const missing: string[] = [];
    let checked = 0;
    for (const entry of entries) {
      const names = new Map([...declarations(entry).keys()].map((n) => [n, [entry, n] as [string, string]]));
      for (const [name, target] of reexports(entry)) names.set(name, target);
      for (const [name, [file, orig]] of names) {
        checked++;
        if (documented(file, orig) !== true) missing.push(`${entry.slice(DIST.length + 1)}: ${name}`);
      }
    }
    expect(checked).toBeGreaterThan(150);
    expect(missing).toEqual([]);
  });

  it('every member of the core types has TSDoc', () => {
    const core: Record<string, string[]> = {
      'engine/engine.d.ts': ['Engine', 'EngineOpenOptions'],
      'engine/call/call-types.d.ts': ['CallOptions', 'CallHandle'],
      'engine/options.d.ts': ['EngineOptions'],
      'engine/registry.d.ts': ['ToolInfo'],
      'engine/result.d.ts': ['TerminalResult', 'StreamRef'],
      'engine/engine-read.d.ts': ['ReadOptions', 'ReadResult'],
      'engine/protocol/messages.d.ts': ['Attachment', 'EmittedMessage'],
      'server/server.d.ts': ['SluiceServer', 'ServerOptions'],
    };
    const missing: string[] = [];
    for (const [file, names] of Object.entries(core)) {
      const lines = readFileSync(join(DIST, file), 'utf8').split('\n');
      for (const name of names) {
        const start = lines.findIndex((l) => new RegExp(`^export (declare )?(interface|class) ${name}\\b`).test(l));
        expect(start, `${name} in ${file}`).toBeGreaterThan(-1);
        for (let i = start + 1; i < lines.length && lines[i] !== '}'; i++) {
          const l = lines[i] as string;
          const member =
            /^ {4}(readonly |static |get |set )*[A-Za-z_$][\w$]*\??[(:<]/.test(l) && !/^ {4}private /.test(l);
          if (member && !(lines[i - 1] ?? '').trim().endsWith('*/')) missing.push(`${name}: ${l.trim()}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });
});
