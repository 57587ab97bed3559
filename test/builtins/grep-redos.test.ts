/**
 * No pattern can stall the engine: the classic catastrophic-backtracking
 * patterns, on lines built to trigger them (JavaScript's RegExp runs
 * `(a+)+$` on 40 `a`s and a `b` for minutes), through every entry point
 * (Engine.search, the model's `grep` tool, `sluice grep`, `GET /v1/search`,
 * which the web view's search calls), each answered at once with its
 * matches; what RE2 syntax leaves out is EBADARGS naming it; other calls on
 * the same worker thread and requests to the same server go on meanwhile;
 * and a page over its matching-time budget ends with ERESOURCELIMIT and the
 * offset it reached, or with its matches and that offset.
 */
import { RE2JS } from 're2js';
import { afterEach, describe, expect, it } from 'vitest';
import type { Engine } from '../../engine/engine.js';
import { searchResultSchema } from '../../engine/wire/schemas.js';
import { requiredLiteral } from '../../store/search-regex.js';
import { cleanup, startTestServer } from '../server/helpers.js';
import { expectNoLeaks, openFixture, sluice } from '../support/read-fixture.js';

afterEach(cleanup);

/**
 * "At once": a backtracking matcher needs ~2^40 steps on these lines (hours);
 * a linear one answers in milliseconds. The bound sits far from both, so a
 * loaded host (another suite beside this one) cannot fail it.
 */
const ANSWERED_MS = 10_000;

/** Lines that make backtracking matchers explode (and two that do not), numbered 0 to 4. */
const LINES = [
  `${'a'.repeat(40)}b`,
  'a'.repeat(40),
  `${'a'.repeat(19)}${'x'.repeat(40)}`,
  `${'word '.repeat(12)}!`,
  'plain text',
];

/** Each hostile pattern and the lines it matches (an empty repetition matches at any line's end). */
const CATALOGUE: Array<[string, number[]]> = [
  ['(a+)+$', [1]],
  ['(a*)*b', [0]],
  ['(a|aa)+$', [1]],
  ['(a|a?)+$', [0, 1, 2, 3, 4]],
  ['(.*a){20}', [0, 1]],
  ['(\\w+\\s?)*$', [0, 1, 2, 3, 4]],
  ['^(a+)+$', [1]],
];

/** Constructs RE2 does not have, each named in the EBADARGS it raises. */
const UNSUPPORTED: Array<[string, string]> = [
  ['(a)\\1', 'backreference'],
  ['foo(?=bar)', 'lookahead'],
  ['(?<!x)y', 'lookbehind'],
  ['(?>a+)b', 'atomic group'],
  ['a++b', 'possessive quantifier'],
];

/** Patterns none of whose matches occur in {@link scanArtifact}: each search of it reads all of it. */
const SCANNING = ['(a+)+$', '(a|aa)+$', '^(a+)+$'];

/** `lines` copies of the line that makes {@link SCANNING} backtrack in JavaScript, which none of them matches. */
async function scanArtifact(engine: Engine, lines: number): Promise<string> {
  const r = await engine.run('bash', { command: `yes '${LINES[0]}' | head -n ${lines}` });
  if (r.output?.kind !== 'streams') throw new Error(`expected named streams, got ${JSON.stringify(r.error)}`);
  return `artifact://${r.output.manifest}/stdout`;
}

async function hostileArtifact(engine: Engine, repeat = 1): Promise<string> {
  // `yes` repeats the five lines (a command's argument is at most 128 KiB, the artifact is larger).
  const r = await engine.run('bash', { command: `yes '${LINES.join('\n')}' | head -n ${repeat * LINES.length}` });
  if (r.output?.kind !== 'streams') throw new Error(`expected named streams, got ${JSON.stringify(r.error)}`);
  return `artifact://${r.output.manifest}/stdout`;
}

/** Runs `f`, returning its result and how long it took. */
async function timed<T>(f: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const t = performance.now();
  const value = await f();
  return { value, ms: performance.now() - t };
}

describe('regular expressions run in linear time', () => {
  it('every catalogue pattern is answered at once by Engine.search, the grep tool, sluice grep and GET /v1/search', async () => {
    const s = await startTestServer();
    const uri = await hostileArtifact(s.engine);
    for (const [pattern, lines] of CATALOGUE) {
      const api = await timed(() => s.engine.search(uri, pattern, { regex: true }));
      expect(
        api.value.lines.map((l) => l.line),
        pattern,
      ).toEqual(lines);
      expect(api.ms, pattern).toBeLessThan(ANSWERED_MS);

      const tool = await timed(() => s.engine.run('grep', { filePath: uri, pattern, regex: true }));
      expect(tool.value.status, pattern).toBe('success');
      expect(tool.value.metadata, pattern).toMatchObject({ matches: lines.length });
      expect(tool.ms, pattern).toBeLessThan(ANSWERED_MS);

      const http = await timed(async () => {
        const res = await s.api(
          `/v1/search?filePath=${encodeURIComponent(uri)}&pattern=${encodeURIComponent(pattern)}&regex=true`,
        );
        expect(res.status, pattern).toBe(200);
        return searchResultSchema.parse(await res.json());
      });
      expect(http.value).toEqual(api.value);
      expect(http.ms, pattern).toBeLessThan(ANSWERED_MS);
    }
    // The CLI: a process each (its start-up is most of its time), the same pages.
    for (const [pattern, lines] of CATALOGUE) {
      const cli = await sluice(['grep', '--regex', '--json', pattern, uri, '--store', s.storeDir]);
      expect({ code: cli.code, stderr: cli.stderr }, pattern).toEqual({ code: 0, stderr: '' });
      const page = JSON.parse(cli.stdout.toString('utf8')) as { lines: Array<{ line: number }> };
      expect(
        page.lines.map((l) => l.line),
        pattern,
      ).toEqual(lines);
    }
  });

  it('backreferences, lookaround, atomic groups and possessive quantifiers are EBADARGS naming the construct', async () => {
    const s = await startTestServer();
    const uri = await hostileArtifact(s.engine);
    for (const [pattern, construct] of UNSUPPORTED) {
      const err = await s.engine.search(uri, pattern, { regex: true }).catch((e: unknown) => e);
      expect(err, pattern).toMatchObject({ code: 'EBADARGS' });
      expect((err as Error).message, pattern).toContain(construct);
      expect((err as { details?: { unsupported?: string } }).details?.unsupported, pattern).toContain(construct);
      const res = await s.api(
        `/v1/search?filePath=${encodeURIComponent(uri)}&pattern=${encodeURIComponent(pattern)}&regex=true`,
      );
      expect(res.status, pattern).toBe(400);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('EBADARGS');
      expect(body.error.message).toContain(construct);
    }
    const cli = await sluice(['grep', '--regex', '(a)\\1', uri, '--store', s.storeDir]);
    expect(cli.code).toBe(2);
    expect(cli.stderr).toMatch(/^EBADARGS: the pattern uses a backreference/);
  });

  it('20 bash calls on the worker thread a hostile search runs on finish meanwhile', async () => {
    // One shared thread: the tool's searches and every bash call run on it. 42 MB of the line that makes
    // them backtrack, searched whole (no line matches) ignoring case, so the searches are still going
    // when the calls end, which the count below shows.
    const { engine, storeDir } = await openFixture({ threads: 1 });
    const uri = await scanArtifact(engine, 1_000_000);
    let searching = SCANNING.length;
    const searches = SCANNING.map((pattern) =>
      engine
        .run('grep', { filePath: uri, pattern, regex: true, ignoreCase: true, limit: 1000 })
        .finally(() => searching--),
    );
    const calls = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const r = await engine.run('bash', { command: `echo call-${i}` });
        return { r, searching };
      }),
    );
    for (const [i, { r, searching: stillSearching }] of calls.entries()) {
      expect(r.status).toBe('success');
      expect(r.model).toContain(`call-${i}`);
      expect(r.durationMs).toBeLessThan(5000);
      expect(stillSearching, `call ${i} ended while a search still ran`).toBeGreaterThan(0);
    }
    for (const r of await Promise.all(searches)) expect(r.status).toBe('success');
    await expectNoLeaks(storeDir);
  });

  it('sluice serve answers other requests while hostile searches run', async () => {
    const s = await startTestServer();
    const uri = await scanArtifact(s.engine, 1_000_000);
    let searching = SCANNING.length;
    const searches = SCANNING.map((pattern) =>
      s
        .api(
          `/v1/search?filePath=${encodeURIComponent(uri)}&pattern=${encodeURIComponent(pattern)}&regex=true&ignoreCase=true&limit=1000`,
        )
        .finally(() => searching--),
    );
    for (let i = 0; i < 5; i++) {
      const info = await timed(() => s.api('/v1/info'));
      expect(info.value.status).toBe(200);
      expect(info.ms).toBeLessThan(ANSWERED_MS);
      expect(searching, `request ${i} answered while a search still ran`).toBeGreaterThan(0);
    }
    for (const res of await Promise.all(searches)) expect(res.status).toBe(200);
  });
});

describe('anchors', () => {
  it('^ and $ hold at each line, also where a flag group clears m or the pattern says \\A and \\z', async () => {
    const { engine } = await openFixture();
    const r = await engine.run('bash', { command: "printf 'foo\\nx foo\\nbar\\nbar x\\n'" });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const uri = `artifact://${r.output.manifest}/stdout`;
    const cases: Array<[string, number[]]> = [
      ['^foo', [0]],
      ['(?-m)^foo', [0]],
      ['(?-m:^foo)', [0]],
      ['bar(?-m)$', [2]],
      ['\\Afoo', [0]],
      ['bar\\z', [2]],
      ['(?m)^bar$', [2]],
    ];
    for (const [pattern, lines] of cases) {
      const page = await engine.search(uri, pattern, { regex: true });
      expect(
        page.lines.map((l) => l.line),
        pattern,
      ).toEqual(lines);
    }
  });
});

describe('the matching-time budget', () => {
  it('a page over it ends with ERESOURCELIMIT and the offset it reached, or with its matches there', async () => {
    // A budget of 1 ms (SLUICE_SEARCH_BUDGET_MS, read by the worker thread the engine starts now).
    process.env.SLUICE_SEARCH_BUDGET_MS = '1';
    try {
      const { engine, storeDir } = await openFixture();
      const r = await engine.run('bash', { command: 'yes abcdefghij | head -c 40000000' });
      if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
      const uri = `artifact://${r.output.manifest}/stdout`;
      const total = 40_000_000 / 11;
      const err = await engine.search(uri, '[k-z]{3}x', { regex: true }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'ERESOURCELIMIT', details: { limit: 'searchTime', budgetMs: 1 } });
      const offset = (err as { details: { offset: number } }).details.offset;
      expect(offset).toBeGreaterThan(0);
      expect(offset).toBeLessThan(total);
      expect((err as Error).message).toContain(`continue with offset=${offset}`);
      // Continuing from there is the next part of the same search.
      const next = await engine.search(uri, '[k-z]{3}x', { regex: true, offset }).catch((e: unknown) => e);
      expect((next as { details: { offset: number } }).details.offset).toBeGreaterThan(offset);
      // With matches, the page ends where it got to instead, and says where to go on.
      const some = await engine.search(uri, 'a.c', { regex: true, limit: 1000 });
      expect(some.matches).toBeGreaterThan(0);
      expect(some.nextOffset).toBeGreaterThan(0);
      await expectNoLeaks(storeDir);
    } finally {
      delete process.env.SLUICE_SEARCH_BUDGET_MS;
    }
  });
});

describe('the required literal of a pattern', () => {
  it('is text every match contains, read conservatively', () => {
    const table: Array<[string, string | undefined]> = [
      ['error\\[E\\d+\\]: cannot', ']: cannot'],
      ['ab+c', 'ab'],
      ['ab*c', undefined],
      ['colou?r', 'colo'],
      ['x{2}yz', 'yz'],
      ['foo(bar|baz)qux', 'foo'],
      ['a|b', undefined],
      ['(?i)abc', undefined],
      ['a\\.b\\.c', 'a.b.c'],
      ['[]x]yz', 'yz'],
      ['😀😀?x', '😀'],
      ['\\Qa.b\\E', undefined],
      ['[[:digit:]ab]+', undefined],
      ['[[:^alpha:]xy]q', undefined],
      ['ab.\\pL|cd', undefined],
      ['ab.\\x41|cd', undefined],
      ['\\101BC', undefined],
      ['a\uFFFDbc', 'bc'],
    ];
    for (const [pattern, literal] of table) expect(requiredLiteral(pattern), pattern).toBe(literal);
  });

  it('on 5000 random patterns, every line RE2 matches contains the literal', () => {
    let seed = 11;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const atoms = [
      'a',
      'b',
      'c',
      'ab',
      'abc',
      'ba',
      'ca',
      '\\.',
      '.',
      '[ab]',
      '[[:digit:]a]',
      '[^a]',
      '\\d',
      '\\b',
      ' ',
    ];
    const quantifiers = ['', '', '', '', '', '*', '+', '?', '{0,2}', '{2}', '*?'];
    const piece = (depth: number): string => {
      const r = rand(10);
      if (r === 0 && depth < 2)
        return `(${seq(depth + 1)}${rand(2) ? `|${seq(depth + 1)}` : ''})${quantifiers[rand(quantifiers.length)]}`;
      return `${atoms[rand(atoms.length)]}${quantifiers[rand(quantifiers.length)]}`;
    };
    const seq = (depth: number): string => Array.from({ length: 1 + rand(5) }, () => piece(depth)).join('');
    const alphabet = 'abc.1 ';
    const lines = Array.from({ length: 200 }, () => Array.from({ length: rand(12) }, () => alphabet[rand(6)]).join(''));
    let checked = 0;
    for (let k = 0; k < 5000; k++) {
      const pattern = rand(5) === 0 ? `${seq(0)}|${seq(0)}` : seq(0);
      let re: RE2JS;
      try {
        re = RE2JS.compile(pattern);
      } catch {
        continue;
      }
      const literal = requiredLiteral(pattern);
      if (literal === undefined) continue;
      checked++;
      for (const line of lines)
        if (re.test(line)) expect(line.includes(literal), `${pattern} on ${JSON.stringify(line)}`).toBe(true);
    }
    expect(checked).toBeGreaterThan(1000);
  });

  it('a search with it finds exactly what one without it finds', async () => {
    const { engine } = await openFixture();
    const words = ['error', 'err', 'or', 'E0425', 'cannot', '[', ']', ' ', 'é', '😀', 'x', 'ab', 'abc'];
    let seed = 7;
    const next = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed;
    };
    const lines = Array.from({ length: 3000 }, () =>
      Array.from({ length: 1 + (next() % 6) }, () => words[next() % words.length]).join(''),
    );
    const r = await engine.run('bash', { command: `cat <<'EOF'\n${lines.join('\n')}\nEOF` });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const uri = `artifact://${r.output.manifest}/stdout`;
    for (const pattern of ['error\\[E\\d+\\]', 'ab+c', 'err(or)?', 'or.*cannot', '😀x', 'é\\s*ab']) {
      const withLiteral = await engine.search(uri, pattern, { regex: true, limit: 1000 });
      // (?:) is a no-op group: it turns the literal off without changing what matches.
      const without = await engine.search(uri, `(?:)${pattern}`, { regex: true, limit: 1000 });
      expect(requiredLiteral(`(?:)${pattern}`)).toBeUndefined();
      expect(
        withLiteral.lines.map((l) => l.line),
        pattern,
      ).toEqual(without.lines.map((l) => l.line));
      const expected = lines.flatMap((l, i) => (new RegExp(pattern, 'u').test(l) ? [i] : []));
      expect(
        withLiteral.lines.map((l) => l.line),
        pattern,
      ).toEqual(expected.slice(0, 1000));
      // Ignoring case, the text is found in each read's text instead: the same lines again.
      const upper = pattern.toUpperCase().replace('\\D', '\\d').replace('\\S', '\\s');
      const folded = await engine.search(uri, upper, { regex: true, ignoreCase: true, limit: 1000 });
      const foldedWithout = await engine.search(uri, `(?:)${upper}`, { regex: true, ignoreCase: true, limit: 1000 });
      expect(
        folded.lines.map((l) => l.line),
        upper,
      ).toEqual(foldedWithout.lines.map((l) => l.line));
      const expectedFolded = lines.flatMap((l, i) => (new RegExp(upper, 'iu').test(l) ? [i] : []));
      expect(
        folded.lines.map((l) => l.line),
        upper,
      ).toEqual(expectedFolded.slice(0, 1000));
    }
  });
});
