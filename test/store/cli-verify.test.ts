import { existsSync, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { encodeManifest } from '../../store/manifest.js';
import { Store } from '../../store/store.js';
import { CLI, filesUnder, flipBit, sha256, sluice, tempDir } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

beforeAll(() => {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npx tsc -p .\` (npm test builds first)`);
});

async function newStore(): Promise<{ dir: string; store: Store }> {
  const dir = join(await tempDir(), 'store');
  return { dir, store: await Store.open(dir) };
}

describe('sluice verify', () => {
  it('exits 0 on a clean store and prints a summary', async () => {
    const { dir, store } = await newStore();
    await store.publishBytes('a\n');
    await store.publishBytes('b\n');
    const r = await sluice(['verify', '--store', dir]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout.toString()).toBe('2 blobs scanned: 2 ok, 0 corrupt, 0 missing\n');
  });

  it('exits 1 and lists corrupt and missing digests, removing nothing', async () => {
    const { dir, store } = await newStore();
    const bad = await store.publishBytes('will rot\n');
    const lost = sha256('lost');
    await store.publishBytes(encodeManifest([{ name: 'stdout', digest: lost, bytes: 4, lines: 1 }]));
    await flipBit(store.layout.blobPath(bad.digest), 1);
    const before = await filesUnder(dir);
    const r = await sluice(['verify', '--store', dir]);
    expect(r.code).toBe(1);
    expect(r.stdout.toString().split('\n')).toEqual([
      '2 blobs scanned: 1 ok, 1 corrupt, 1 missing',
      `corrupt ${bad.digest}`,
      `missing ${lost}`,
      '',
    ]);
    expect(await filesUnder(dir)).toEqual(before);
  });

  it('prints the report as JSON with --json, using $SLUICE_STORE', async () => {
    const { dir, store } = await newStore();
    const blob = await store.publishBytes('x\n');
    await fsp.appendFile(store.layout.blobPath(blob.digest), 'y');
    const r = await sluice(['verify', '--json'], { env: { SLUICE_STORE: dir } });
    expect(r.code).toBe(1);
    // toMatchObject: the CLI report may carry more than the store's (e.g. session log checks).
    expect(JSON.parse(r.stdout.toString())).toMatchObject({
      scanned: 1,
      ok: 0,
      corrupt: [blob.digest],
      missing: [],
      unexpected: [],
    });
  });

  it('rejects stray arguments with EBADARGS and unknown options with EBADOPTION (exit 2)', async () => {
    const { dir } = await newStore();
    const stray = await sluice(['verify', 'extra', '--store', dir]);
    expect(stray.code).toBe(2);
    expect(stray.stderr).toMatch(/^EBADARGS: /);
    const unknown = await sluice(['verify', '--fix', '--store', dir]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^EBADOPTION: /);
  });

  it('fails with ENOTFOUND (exit 1) when there is no store', async () => {
    const cwd = await tempDir();
    const r = await sluice(['verify'], { cwd });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^ENOTFOUND: no sluice store at .*\.sluice/);
    await expect(fsp.stat(join(cwd, '.sluice'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
