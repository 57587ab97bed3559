import { existsSync, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ABSENT, CLI, expectNoLeaks, flipBit, openFixture, sluice, tempDir } from '../support/read-fixture.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npx tsc -p .\` (npm test builds first)`);
});

describe('sluice read and Engine.read share one code path', () => {
  it('prints what Engine.read returns, for artifact streams, a bare manifest, files and directories', async () => {
    const { engine, cwd, storeDir } = await openFixture();
    const r = await engine.run('bash', { command: 'seq 1 25; printf "warn\\n" >&2' });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    await fsp.writeFile(join(cwd, 'notes.txt'), 'alpha\nbeta\ngamma\n');
    await fsp.mkdir(join(cwd, 'sub'));
    const cases: Array<{ filePath: string; offset?: number; limit?: number }> = [
      { filePath: `artifact://${r.output.manifest}/stdout`, offset: 20, limit: 3 },
      { filePath: `artifact://${r.output.manifest}/stderr` },
      { filePath: `artifact://${r.output.manifest}` },
      { filePath: 'notes.txt', offset: 1, limit: 1 },
      { filePath: '.' },
    ];
    for (const c of cases) {
      const expected = await engine.read(c.filePath, c);
      const flags = [
        ...(c.offset === undefined ? [] : ['--offset', String(c.offset)]),
        ...(c.limit === undefined ? [] : ['--limit', String(c.limit)]),
      ];
      const json = await sluice(['read', c.filePath, ...flags, '--json', '--store', storeDir], { cwd });
      expect({ c, code: json.code, stderr: json.stderr }).toEqual({ c, code: 0, stderr: '' });
      expect(JSON.parse(json.stdout.toString('utf8'))).toEqual(expected);
    }
    // Without --json: the content alone, as is (an artifact page, then a numbered file page).
    for (const c of [cases[0], cases[3]] as Array<{ filePath: string; offset: number; limit: number }>) {
      const flags = ['--offset', String(c.offset), '--limit', String(c.limit)];
      const text = await sluice(['read', c.filePath, ...flags, '--store', storeDir], { cwd });
      expect(text.code).toBe(0);
      expect(text.stdout.toString('utf8')).toBe((await engine.read(c.filePath, c)).content);
    }
    // The artifact page is stored text exactly; the file page is numbered.
    expect((await engine.read(cases[0]?.filePath as string, cases[0])).content).toBe('21\n22\n23\n');
    expect((await engine.read('notes.txt', { offset: 1, limit: 1 })).content).toBe('     2\tbeta\n');
    await expectNoLeaks(storeDir);
  });

  it('exits 2 for EBADURI and EBADARGS, 1 for other errors, printing CODE: message; nothing on stdout', async () => {
    const { engine, root, cwd, storeDir } = await openFixture();
    const r = await engine.run('bash', { command: 'echo precious' });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    const stdoutBlob = r.output.streams[0]?.digest as string;
    await fsp.writeFile(join(root, 'outside.txt'), 'secret\n');
    await fsp.writeFile(join(cwd, 'bin.dat'), Buffer.from([0, 1, 2, 3]));
    await flipBit(join(storeDir, 'blobs', 'sha256', stdoutBlob.slice(0, 2), stdoutBlob.slice(2)), 0);
    const cases: Array<[string[], string, number]> = [
      [['read', `artifact://${r.output.manifest}/../x`], 'EBADURI', 2],
      [['read', `artifact://${r.output.manifest}/stdout`, '--limit', '2001'], 'EBADARGS', 2],
      [['read', `artifact://${ABSENT}`], 'ENOTFOUND', 1],
      [['read', `artifact://${r.output.manifest}/stdout`], 'EINTEGRITY', 1],
      [['read', '../outside.txt'], 'EDENIED', 1],
      [['read', 'bin.dat'], 'EBINARY', 1],
    ];
    for (const [args, code, exit] of cases) {
      const run = await sluice([...args, '--store', storeDir], { cwd });
      expect({ args, code: run.code, stdout: run.stdout.length }).toEqual({ args, code: exit, stdout: 0 });
      expect(run.stderr).toMatch(new RegExp(`^${code}: \\S`));
      expect(run.stderr.split('\n').filter(Boolean)).toHaveLength(1);
    }
    await expectNoLeaks(storeDir);
  });

  it('reads a file without a store and does not create one', async () => {
    const cwd = await tempDir();
    await fsp.writeFile(join(cwd, 'hello.txt'), 'hi\n');
    const run = await sluice(['read', 'hello.txt', '--json'], { cwd });
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout.toString())).toEqual({
      content: '     1\thi\n',
      offset: 0,
      lines: 1,
      totalLines: 1,
      nextOffset: null,
      nextByteOffset: null,
      lossy: false,
    });
    expect(await fsp.readdir(cwd)).toEqual(['hello.txt']);
    // An artifact needs the store: without one it is ENOTFOUND, or EBADURI when malformed.
    const missing = await sluice(['read', `artifact://${ABSENT}`], { cwd });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^ENOTFOUND: no sluice store at /);
    expect(await fsp.readdir(cwd)).toEqual(['hello.txt']);
  });
});
