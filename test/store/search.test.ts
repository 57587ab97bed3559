/**
 * Searching artifacts, checked against `grep -n` (GNU grep) on the same
 * bytes: the same lines, the same `N:`/`N-`/`--` layout with context, only
 * the numbers zero-based. Then paging, bounds and errors.
 */
import { spawnSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeManifest } from '../../store/manifest.js';
import { searchArtifact } from '../../store/search.js';
import { formatSearchPage, parseSearchText } from '../../store/search-text.js';
import { STORE_BACKENDS } from './backends.js';
import { tempDir, tmpEntries } from './helpers.js';

/** `grep -n` of `file`, its line numbers made zero-based. */
function grepN(file: string, args: string[]): string[] {
  const r = spawnSync('grep', ['-n', ...args, '--', file], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0 && r.status !== 1) throw new Error(`grep failed: ${r.stderr}`);
  return r.stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.replace(/^(\d+)([:-])/, (_, n: string, sep: string) => `${Number(n) - 1}${sep}`));
}

const body = (text: string): string[] => text.split('\n').filter((l) => l !== '' && !l.startsWith('['));

describe.each(STORE_BACKENDS)('search inside an artifact ($name)', ({ openStore }) => {
  it('property: literal and regex searches, with context, give grep -n lines, zero-based', async () => {
    const store = await openStore();
    const dir = await tempDir();
    const file = join(dir, 'blob');
    const lineArb = fc.array(fc.constantFrom('a', 'b', 'ab', 'x', ' ', 'é', 'err', 'or'), { maxLength: 8 });
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          lineArb.map((p) => p.join('')),
          { maxLength: 60 },
        ),
        fc.boolean(),
        fc.constantFrom('a', 'ab', 'err', 'é', 'x b', 'or'),
        fc.constantFrom<[string, string[]]>(
          ['b+a', ['-E']],
          ['^a', ['-E']],
          ['b$', ['-E']],
          ['e.r', ['-E']],
          ['[xé]', ['-E']],
        ),
        fc.integer({ min: 0, max: 3 }),
        fc.boolean(),
        async (lines, endNl, literal, [re, reFlags], context, useRegex) => {
          const content = lines.join('\n') + (endNl && lines.length > 0 ? '\n' : '');
          await fsp.writeFile(file, content);
          const blob = await store.publishBytes(content);
          const uri = `artifact://${blob.digest}`;
          const [pattern, flags] = useRegex ? [re, reFlags] : [literal, ['-F']];
          const ctx = context > 0 ? [`-C${context}`] : [];
          const page = await searchArtifact(store, uri, { pattern, regex: useRegex, context, limit: 1000 });
          expect(body(formatSearchPage(page, uri, 0))).toEqual(grepN(file, [...flags, ...ctx, pattern]));
          expect(page.nextOffset).toBeNull();
          expect(page.matches).toBe(
            grepN(file, [...flags, '-c', pattern]).length > 0
              ? Number(spawnSync('grep', [...flags, '-c', '--', pattern, file], { encoding: 'utf8' }).stdout.trim())
              : 0,
          );
        },
      ),
      { numRuns: 200 },
    );
  });

  it('ignores case like grep -i, and parses its own text form back into lines', async () => {
    const store = await openStore();
    const content = 'Error one\nfine\nERROR two\nerror three\n';
    const blob = await store.publishBytes(content);
    const uri = `artifact://${blob.digest}`;
    const page = await searchArtifact(store, uri, { pattern: 'error', ignoreCase: true });
    expect(page.lines.map((l) => l.line)).toEqual([0, 2, 3]);
    const text = formatSearchPage(page, uri, 0);
    expect(text).toBe(
      `0:Error one\n2:ERROR two\n3:error three\n[3 matches in ${uri}, lines 0-3 of 4 searched; line numbers are zero-based read offsets]\n`,
    );
    expect(parseSearchText(text)).toEqual(page.lines);
  });

  it('pages with limit and offset: each page continues exactly after the last match of the one before', async () => {
    const store = await openStore();
    const content = Array.from({ length: 5000 }, (_, i) => (i % 7 === 0 ? `hit ${i}\n` : `miss ${i}\n`)).join('');
    const blob = await store.publishBytes(content);
    const uri = `artifact://${blob.digest}`;
    const all: number[] = [];
    let offset: number | null = 0;
    let pages = 0;
    while (offset !== null) {
      const page = await searchArtifact(store, uri, { pattern: 'hit', limit: 100, offset });
      expect(page.matches).toBeLessThanOrEqual(100);
      all.push(...page.lines.map((l) => l.line));
      offset = page.nextOffset;
      pages++;
    }
    expect(all).toEqual(Array.from({ length: 715 }, (_, i) => i * 7));
    expect(pages).toBe(8);
  });

  it('searches a stream of a manifest, and cuts a long shown line with its size', async () => {
    const store = await openStore();
    const long = `${'y'.repeat(5000)} needle ${'z'.repeat(100)}`;
    const out = await store.publishBytes(`a\n${long}\nb\n`);
    const err = await store.publishBytes('needle in stderr\n');
    const manifest = await store.publishBytes(
      encodeManifest([
        { name: 'stdout', digest: out.digest, bytes: out.bytes, lines: out.lines },
        { name: 'stderr', digest: err.digest, bytes: err.bytes, lines: err.lines },
      ]),
    );
    const page = await searchArtifact(store, `artifact://${manifest.digest}/stdout`, { pattern: 'needle' });
    expect(page).toMatchObject({ matches: 1, totalLines: 3, stream: 'stdout', digest: manifest.digest });
    expect(page.lines[0]).toMatchObject({ line: 1, match: true, cut: Buffer.byteLength(long) });
    expect(page.lines[0]?.text).toBe('y'.repeat(2000));
    const stderr = await searchArtifact(store, `artifact://${manifest.digest}/stderr`, { pattern: 'needle' });
    expect(stderr.lines).toEqual([{ line: 0, text: 'needle in stderr', match: true }]);
  });

  it('finds a match at the start of a line longer than the search window and counts the lines after it', async () => {
    const store = await openStore();
    const w = store.writer();
    await w.write(Buffer.from('before\nneedle'));
    const chunk = Buffer.alloc(1024 * 1024, 0x78);
    for (let i = 0; i < 3; i++) await w.write(chunk);
    await w.write(Buffer.from('\nafter needle\n'));
    const blob = await w.commit();
    const page = await searchArtifact(store, `artifact://${blob.digest}`, { pattern: 'needle' });
    expect(page.lines.map((l) => [l.line, l.match])).toEqual([
      [1, true],
      [2, true],
    ]);
    expect(page.longLines).toBe(1);
    expect(page.totalLines).toBe(3);
  });

  it('rejects bad options with EBADARGS and bad URIs as a read does, leaving nothing behind', async () => {
    const store = await openStore();
    const blob = await store.publishBytes('x\n');
    const uri = `artifact://${blob.digest}`;
    const bad: Array<[string, object, string]> = [
      [uri, { pattern: '' }, 'EBADARGS'],
      [uri, { pattern: '(', regex: true }, 'EBADARGS'],
      [uri, { pattern: 'x', context: 11 }, 'EBADARGS'],
      [uri, { pattern: 'x', limit: 0 }, 'EBADARGS'],
      [uri, { pattern: 'x', offset: -1 }, 'EBADARGS'],
      ['/etc/passwd', { pattern: 'x' }, 'EBADURI'],
      [`artifact://${'0'.repeat(64)}`, { pattern: 'x' }, 'ENOTFOUND'],
      [`${uri}/stdout`, { pattern: 'x' }, 'ENOTMANIFEST'],
    ];
    for (const [u, opts, code] of bad) {
      await expect(searchArtifact(store, u, opts as { pattern: string })).rejects.toMatchObject({ code });
    }
    expect(await tmpEntries(store)).toEqual([]);
  });
});
