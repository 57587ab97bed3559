import { promises as fsp } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { codeOf, expectNoLeaks, openFixture } from '../support/read-fixture.js';

/** A secret file outside the working root (beside it, under the same test directory). */
async function outside(root: string): Promise<{ dir: string; file: string }> {
  const dir = join(root, 'outside');
  await fsp.mkdir(dir);
  const file = join(dir, 'secret.txt');
  await fsp.writeFile(file, 'TOP SECRET\n');
  return { dir, file };
}

describe('filesystem reads are prepared operations checked by the approval policy', () => {
  it('the default policy denies paths outside the working root: absolute and relative', async () => {
    const { engine, root, storeDir, ops } = await openFixture();
    const { file } = await outside(root);
    for (const filePath of [file, '../outside/secret.txt', '../outside', '/']) {
      const r = await engine.run('read', { filePath });
      expect({ filePath, code: r.error?.code }).toEqual({ filePath, code: 'EDENIED' });
      expect(r.model).not.toContain('TOP SECRET');
    }
    expect(ops.map((o) => o.kind)).toEqual(['fs.read', 'fs.read', 'fs.read', 'fs.read']);
    expect(ops[0]).toEqual({ kind: 'fs.read', path: file, realPath: file });
    await expectNoLeaks(storeDir);
  });

  it('denies reads through a symlink that leaves the root, file or directory', async () => {
    const { engine, root, cwd, storeDir, ops } = await openFixture();
    const { dir, file } = await outside(root);
    await fsp.symlink(file, join(cwd, 'innocent.txt'));
    await fsp.symlink(dir, join(cwd, 'docs'));
    for (const filePath of ['innocent.txt', 'docs', 'docs/secret.txt']) {
      const r = await engine.run('read', { filePath });
      expect({ filePath, code: r.error?.code }).toEqual({ filePath, code: 'EDENIED' });
      expect(r.model).not.toContain('TOP SECRET');
    }
    // The policy judged the real path, not the link's.
    expect(ops[0]).toEqual({ kind: 'fs.read', path: join(cwd, 'innocent.txt'), realPath: file });
    expect(ops[2]).toEqual({ kind: 'fs.read', path: join(cwd, 'docs', 'secret.txt'), realPath: file });
    await expectNoLeaks(storeDir);
  });

  it('allows a symlink that stays inside the root, and the root itself', async () => {
    const { engine, cwd, ops } = await openFixture();
    await fsp.writeFile(join(cwd, 'real.txt'), 'inside\n');
    await fsp.symlink('real.txt', join(cwd, 'alias.txt'));
    expect(await engine.read('alias.txt')).toMatchObject({ content: '     1\tinside\n' });
    expect(ops.at(-1)).toEqual({ kind: 'fs.read', path: join(cwd, 'alias.txt'), realPath: join(cwd, 'real.txt') });
    expect(await engine.read(cwd)).toMatchObject({ content: 'alias.txt\nreal.txt\n' });
  });

  it('a missing path is ENOTFOUND inside the root but EDENIED outside it: no existence oracle', async () => {
    const { engine, root, cwd, storeDir, ops } = await openFixture();
    const { dir } = await outside(root);
    await fsp.symlink(dir, join(cwd, 'docs'));
    expect(await codeOf(engine.read('nope.txt'))).toBe('ENOTFOUND');
    expect(await codeOf(engine.read('no/such/dir/file.txt'))).toBe('ENOTFOUND');
    expect(await codeOf(engine.read(join(dir, 'nope.txt')))).toBe('EDENIED');
    // Through the link the missing file would be outside: judged there.
    expect(await codeOf(engine.read('docs/nope.txt'))).toBe('EDENIED');
    expect(ops.at(-1)).toEqual({
      kind: 'fs.read',
      path: join(cwd, 'docs', 'nope.txt'),
      realPath: join(dir, 'nope.txt'),
    });
    await expectNoLeaks(storeDir);
  });

  it('expands ~ before preparing, and a host policy can deny anything', async () => {
    const seen: string[] = [];
    const { engine, cwd, storeDir, ops } = await openFixture({
      approve: (op) => {
        seen.push(op.kind);
        return op.kind !== 'fs.read';
      },
    });
    await fsp.writeFile(join(cwd, 'mine.txt'), 'mine\n');
    expect(await codeOf(engine.read('mine.txt'))).toBe('EDENIED');
    expect(await codeOf(engine.read('~/definitely-not-here-sluice.txt'))).toBe('EDENIED');
    expect(ops.at(-1)).toMatchObject({ kind: 'fs.read', path: join(homedir(), 'definitely-not-here-sluice.txt') });
    // Artifact reads never pass through path permissions: this policy's fs.read denial does not apply.
    const r = await engine.run('bash', { command: 'echo via-artifact' });
    if (r.output?.kind !== 'streams') throw new Error('bash has named streams');
    expect(await engine.read(`artifact://${r.output.manifest}/stdout`)).toMatchObject({ content: 'via-artifact\n' });
    expect(seen).toEqual(['fs.read', 'fs.read', 'process.spawn', 'artifact.read']);
    await expectNoLeaks(storeDir);
  });
});
