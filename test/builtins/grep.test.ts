/**
 * The built-in `grep` through every surface: a model's call (approved as an
 * artifact read, self-paginating, never retained), Engine.search,
 * `sluice grep`, `GET /v1/search`, and compaction treating it as artifact
 * retrieval.
 */
import { existsSync } from 'node:fs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ToolResultItem } from '../../compaction/history.js';
import { ARTIFACT_READ_OMITTED, pruneForRetry } from '../../compaction/prune.js';
import { searchResultSchema } from '../../engine/wire/schemas.js';
import { call, result } from '../compaction/support.js';
import { cleanup, startTestServer } from '../server/helpers.js';
import { blobCount, CLI, expectNoLeaks, openFixture, sluice } from '../support/read-fixture.js';

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npx tsc -p .\` (npm test builds first)`);
});
afterEach(cleanup);

describe('grep over artifacts', () => {
  it('a model call finds lines with zero-based numbers, approved as an artifact read, retaining nothing', async () => {
    const { engine, storeDir, ops } = await openFixture();
    const r = await engine.run('bash', { command: 'seq 1 30000' });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const uri = `artifact://${r.output.manifest}/stdout`;
    const blobs = await blobCount(storeDir);
    const g = await engine.run('grep', { filePath: uri, pattern: '2999', context: 1, limit: 2 });
    expect(g.status).toBe('success');
    // 2999 is line 2998 (zero-based); 12999 the next match. The limit of 2 stops there and says how to go on.
    expect(g.model).toBe(
      '2997-2998\n2998:2999\n2999-3000\n--\n12997-12998\n12998:12999\n12999-13000\n' +
        `[2 matches in ${uri}, lines 0-12998 of 30000 searched; line numbers are zero-based read offsets]\n` +
        `[More: grep(filePath="${uri}", pattern="2999", context=1, limit=2, offset=12999)]\n`,
    );
    expect(ops.at(-1)).toMatchObject({ kind: 'artifact.read', uri, digest: r.output.manifest, stream: 'stdout' });
    expect(await blobCount(storeDir)).toBe(blobs);
    // The number is a read offset: reading there gives the matching line.
    expect((await engine.read(uri, { offset: 2998, limit: 1 })).content).toBe('2999\n');
    await expectNoLeaks(storeDir);
  });

  it('refuses a filesystem path with EBADURI before anything is read', async () => {
    const { engine, ops } = await openFixture();
    const g = await engine.run('grep', { filePath: '/etc/passwd', pattern: 'root' });
    expect(g.status).toBe('failed');
    expect(g.error?.code).toBe('EBADURI');
    expect(ops).toEqual([]);
  });

  it('Engine.search, sluice grep and GET /v1/search agree, paging with nextOffset', async () => {
    const { engine, cwd, storeDir } = await openFixture();
    const r = await engine.run('bash', {
      command: 'for i in $(seq 1 500); do echo "row $i"; [ $((i % 100)) = 0 ] && echo "ERROR at $i"; done',
    });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const uri = `artifact://${r.output.manifest}/stdout`;
    const first = await engine.search(uri, 'error at \\d+00', { regex: true, ignoreCase: true, limit: 3 });
    expect(first.lines.map((l) => [l.line, l.text])).toEqual([
      [100, 'ERROR at 100'],
      [201, 'ERROR at 200'],
      [302, 'ERROR at 300'],
    ]);
    expect(first).toMatchObject({ matches: 3, offset: 0, totalLines: 505, nextOffset: 303, longLines: 0 });
    const second = await engine.search(uri, 'error at \\d+00', { regex: true, ignoreCase: true, offset: 303 });
    expect(second.lines.map((l) => l.line)).toEqual([403, 504]);
    expect(second.nextOffset).toBeNull();

    const json = await sluice(
      ['grep', '--regex', '--ignore-case', '--limit', '3', '--json', 'error at \\d+00', uri, '--store', storeDir],
      { cwd },
    );
    expect({ code: json.code, stderr: json.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(json.stdout.toString('utf8'))).toEqual(first);
    const text = await sluice(['grep', 'ERROR', uri, '--limit', '1', '--store', storeDir], { cwd });
    expect(text.code).toBe(0);
    expect(text.stdout.toString('utf8')).toBe(
      `100:ERROR at 100\n[1 match in ${uri}, lines 0-100 of 505 searched; line numbers are zero-based read offsets]\n`,
    );
    expect(text.stderr).toBe('sluice grep: more matches may follow; continue with --offset 101\n');
    const none = await sluice(['grep', 'absent', uri, '--store', storeDir], { cwd });
    expect(none.code).toBe(1);
    const bad = await sluice(['grep', 'x', '/etc/passwd', '--store', storeDir], { cwd });
    expect({ code: bad.code, stdout: bad.stdout.toString('utf8') }).toEqual({ code: 2, stdout: '' });
    expect(bad.stderr).toMatch(/^EBADURI: /);
    await expectNoLeaks(storeDir);
  });

  it('a literal search that finds nothing says so when its pattern reads as a regular expression', async () => {
    const { engine, cwd, storeDir } = await openFixture();
    const r = await engine.run('bash', { command: 'seq 9990 10010' });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const uri = `artifact://${r.output.manifest}/stdout`;
    const literal = await engine.run('grep', { filePath: uri, pattern: '^9999' });
    expect(literal.model).toBe(
      `[No matches in ${uri}, lines 0-20 of 21 searched; line numbers are zero-based read offsets]\n` +
        '[The pattern "^9999" was searched as literal text; it looks like a regular expression: search with regex=true to match it as one]\n',
    );
    const regex = await engine.run('grep', { filePath: uri, pattern: '^9999', regex: true });
    expect(regex.model.startsWith('9:9999\n')).toBe(true);
    // Plain text, or text with a dot as in a version number, gets no note.
    for (const pattern of ['absent', '1.2']) {
      const plain = await engine.run('grep', { filePath: uri, pattern });
      expect(plain.model).not.toContain('searched as literal text');
    }
    const cli = await sluice(['grep', '^9999', uri, '--store', storeDir], { cwd });
    expect(cli.code).toBe(1);
    expect(cli.stderr).toBe(
      'sluice grep: "^9999" was searched as literal text; add --regex to match it as a regular expression\n',
    );
    const found = await sluice(['grep', '--regex', '^9999', uri, '--store', storeDir], { cwd });
    expect({ code: found.code, stderr: found.stderr }).toEqual({ code: 0, stderr: '' });
    await expectNoLeaks(storeDir);
  });

  it('GET /v1/search returns the same page as Engine.search, and errors with their status', async () => {
    const s = await startTestServer();
    const r = await s.engine.run('bash', { command: 'seq 1 1000' });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const uri = `artifact://${r.output.manifest}/stdout`;
    const res = await s.api(`/v1/search?filePath=${encodeURIComponent(uri)}&pattern=99&context=1&limit=5`);
    expect(res.status).toBe(200);
    const body = searchResultSchema.parse(await res.json());
    expect(body).toEqual(await s.engine.search(uri, '99', { context: 1, limit: 5 }));
    expect(body.lines.filter((l) => l.match).map((l) => l.line)).toEqual([98, 198, 298, 398, 498]);
    const bad = await s.api(
      `/v1/search?filePath=${encodeURIComponent(uri)}&pattern=${encodeURIComponent('(')}&regex=true`,
    );
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('EBADARGS');
    const missing = await s.api(`/v1/search?filePath=artifact://${'f'.repeat(64)}&pattern=x`);
    expect(missing.status).toBe(404);
  });

  it('compaction omits grep output like an artifact read, parsing its arguments structurally', () => {
    const uri = `artifact://${'a'.repeat(64)}/stdout`;
    const history = [
      call('g1', 'grep', { filePath: uri, pattern: 'x' }),
      result('g1', { model: '12:x\n', output: { kind: 'page', bytes: 5, lines: 1 }, metadata: { matches: 1 } }),
      call('g2', 'grep', JSON.stringify({ filePath: uri, pattern: 'y' })),
      result('g2', { model: '3:y\n', output: { kind: 'page', bytes: 4, lines: 1 } }),
      // A path with the scheme inside it is not an artifact URI: ordinary pruning.
      call('g3', 'grep', { filePath: '/tmp/artifact://x', pattern: 'x' }),
      result('g3', { status: 'failed', model: 'EBADURI: grep searches artifacts only' }),
    ];
    const pruned = pruneForRetry(history) as ToolResultItem[];
    expect(pruned[1]).toMatchObject({ model: ARTIFACT_READ_OMITTED, output: null, metadata: {} });
    expect(pruned[3]).toMatchObject({ model: ARTIFACT_READ_OMITTED, output: null });
    expect(pruned[5]?.model).not.toBe(ARTIFACT_READ_OMITTED);
  });
});
