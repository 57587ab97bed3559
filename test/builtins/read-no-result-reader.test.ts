import { existsSync, promises as fsp } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { openFixture } from '../support/read-fixture.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The retired tool's name in its spellings, assembled so this file does not itself contain them. */
const FORBIDDEN = [
  ['read', 'tool', 'result'].join('_'),
  ['read', 'tool', 'result'].join('-'),
  ['read', 'Tool', 'Result'].join(''),
];

async function* files(dir: string): AsyncGenerator<string> {
  for (const e of await fsp.readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* files(p);
    else if (e.isFile()) yield p;
  }
}

describe('read is the only result-reading tool', () => {
  it('the registry lists exactly the built-ins bash and read, and read has only filePath, offset, limit, byteOffset', async () => {
    const { engine } = await openFixture();
    const tools = engine.tools();
    expect(tools.map((t) => t.name).sort()).toEqual(['bash', 'grep', 'read']);
    expect(tools.every((t) => t.source === 'builtin')).toBe(true);
    const read = tools.find((t) => t.name === 'read');
    expect(read).toMatchObject({ selfPaginating: true, output: { kind: 'single' } });
    const schema = read?.argsSchema as { properties: Record<string, unknown>; required: string[] };
    expect(Object.keys(schema.properties).sort()).toEqual(['byteOffset', 'filePath', 'limit', 'offset']);
    expect(schema.required).toEqual(['filePath']);
    expect(tools.find((t) => t.name === 'bash')?.selfPaginating).toBe(false);
    for (const t of tools) {
      const text = `${t.description} ${JSON.stringify(t.argsSchema)}`.toLowerCase();
      for (const name of FORBIDDEN) expect(text).not.toContain(name.toLowerCase());
    }
    expect(() => engine.call(FORBIDDEN[0] as string, {})).toThrow(expect.objectContaining({ code: 'EUNKNOWNTOOL' }));
  });

  it('truncation hints point only at read with an artifact URI', async () => {
    const { engine } = await openFixture();
    const r = await engine.run('bash', { command: 'seq 1 30000; seq 1 30000 >&2' });
    const hints = r.model.split('\n').filter((l) => l.startsWith('[Truncated:'));
    expect(hints).toHaveLength(2);
    for (const h of hints)
      expect(h).toMatch(
        /^\[Truncated: [^\]]*\. Read more: read\(filePath="artifact:\/\/[0-9a-f]{64}\/std(out|err)", offset=\d+\)\]$/,
      );
    for (const name of FORBIDDEN) expect(r.model.toLowerCase()).not.toContain(name.toLowerCase());
  });

  it('no source file, doc or README names a separate result-reading tool', async () => {
    const hits: string[] = [];
    let scanned = 0;
    const roots = ['engine', 'cli', 'server', 'compaction', 'workers', 'store', 'docs', 'README.md', 'AGENTS.md'].map(
      (p) => join(ROOT, p),
    );
    for (const root of roots.filter((p) => existsSync(p))) {
      const stat = await fsp.stat(root);
      const list = stat.isDirectory()
        ? files(root)
        : (async function* () {
            yield root;
          })();
      for await (const file of list) {
        const text = (await fsp.readFile(file, 'utf8')).toLowerCase();
        scanned++;
        for (const name of FORBIDDEN)
          if (text.includes(name.toLowerCase())) hits.push(`${relative(ROOT, file)}: ${name}`);
      }
    }
    expect(scanned).toBeGreaterThan(30);
    expect(hits).toEqual([]);
  });
});
