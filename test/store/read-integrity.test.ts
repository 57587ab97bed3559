import { promises as fsp } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Store } from '../../store/store.js';
import { STORE_BACKENDS } from './backends.js';
import { countBytesRead, filesUnder, flipBit, sha256, tempDir, tmpEntries } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

const SMALL = 'alpha\nbeta\ngamma\n';
/** Over 1 MiB: corrupting it must also leave no half-built index behind. */
const LARGE = Buffer.from('a line of the large blob\n'.repeat(60_000));

/** `bytes` with bit `bit` of byte `at` flipped (a copy). */
function flipped(bytes: Buffer, at: number, bit: number): Buffer {
  const out = Buffer.from(bytes);
  out[at] = (out[at] ?? 0) ^ (1 << bit);
  return out;
}

type Damage = [label: string, damage: (bytes: Buffer) => Buffer];
const damages: Damage[] = [
  ['truncated by one byte', (b) => b.subarray(0, b.length - 1)],
  ['truncated to nothing', () => Buffer.alloc(0)],
  ['extended with trailing garbage', (b) => Buffer.concat([b, Buffer.from('garbage')])],
  ['extended with one newline', (b) => Buffer.concat([b, Buffer.from('\n')])],
  ['one bit flipped in the first byte', (b) => flipped(b, 0, 0)],
  ['one bit flipped in the middle', (b) => flipped(b, Math.floor(b.length / 2), 3)],
  ['one bit flipped in the last byte', (b) => flipped(b, b.length - 1, 7)],
];

async function freshStore(): Promise<{ dir: string; store: Store }> {
  const dir = await tempDir();
  return { dir, store: await Store.open(dir) };
}

describe.each(STORE_BACKENDS)('integrity on read ($name)', ({ openStore, rewriteBlob, removeBlob, reopen }) => {
  for (const [name, content] of [
    ['small', SMALL],
    ['large', LARGE],
  ] as const) {
    it.each(damages)(`a ${name} blob %s fails with EINTEGRITY, never a short or altered page`, async (_l, damage) => {
      const store = await openStore();
      const { digest } = await store.publishBytes(content);
      await rewriteBlob(store, digest, damage);
      // A fresh store instance: nothing is remembered as verified; opening it does not read blobs.
      const reader = await reopen(store);
      for (const opts of [{}, { offset: 0, limit: 1 }, { offset: 1_000_000 }]) {
        await expect(reader.readPage(`artifact://${digest}`, opts)).rejects.toMatchObject({
          code: 'EINTEGRITY',
          details: { digest },
        });
      }
      expect(await tmpEntries(reader)).toEqual([]);
    });
  }

  it('fails with ENOTFOUND for an absent blob, and the store still opens and reads other blobs', async () => {
    const store = await openStore();
    const kept = await store.publishBytes('kept\n');
    const gone = await store.publishBytes('gone\n');
    await removeBlob(store, gone.digest);
    await rewriteBlob(store, kept.digest, (b) => flipped(b, 0, 0));
    const reopened = await reopen(store);
    await expect(reopened.readPage(`artifact://${gone.digest}`)).rejects.toMatchObject({
      code: 'ENOTFOUND',
      details: { digest: gone.digest },
    });
    await expect(reopened.readPage(`artifact://${kept.digest}`)).rejects.toMatchObject({ code: 'EINTEGRITY' });
    const other = await reopened.publishBytes('other\n');
    expect((await reopened.readPage(`artifact://${other.digest}`)).content).toBe('other\n');
  });
});

describe('integrity on read of the directory store', () => {
  it('treats a directory in place of a blob as corrupt (EINTEGRITY)', async () => {
    const { store } = await freshStore();
    const digest = sha256('dir');
    await fsp.mkdir(store.layout.blobPath(digest), { recursive: true });
    await expect(store.readPage(`artifact://${digest}`)).rejects.toMatchObject({ code: 'EINTEGRITY' });
  });

  it('hashes a blob on its first read only; later reads of the unchanged file cost O(page)', async () => {
    const { dir, store } = await freshStore();
    const { digest, bytes } = await store.publishBytes(LARGE);
    const reader = await Store.open(dir);
    const uri = `artifact://${digest}`;
    const first = await countBytesRead(() => reader.readPage(uri, { limit: 2 }));
    expect(first.bytesRead).toBeGreaterThanOrEqual(bytes);
    const second = await countBytesRead(() => reader.readPage(uri, { limit: 2 }));
    expect(second.result.content).toBe('a line of the large blob\n'.repeat(2));
    expect(second.bytesRead).toBeLessThan(128 * 1024);
    // Verification is per store instance: another instance hashes again.
    const third = await countBytesRead(async () => (await Store.open(dir)).readPage(uri, { limit: 2 }));
    expect(third.bytesRead).toBeGreaterThanOrEqual(bytes);
  });

  it('re-verifies a blob modified after it was verified, even when its size and mtime are put back', async () => {
    const { store } = await freshStore();
    const { digest } = await store.publishBytes(SMALL);
    const uri = `artifact://${digest}`;
    const path = store.layout.blobPath(digest);
    expect((await store.readPage(uri)).content).toBe(SMALL);
    const { atime, mtime } = await fsp.stat(path);
    await flipBit(path, 3);
    await fsp.utimes(path, atime, mtime);
    await expect(store.readPage(uri)).rejects.toMatchObject({ code: 'EINTEGRITY' });
  });

  it('re-verifies a blob replaced by another file (new inode) carrying the old size and mtime', async () => {
    const { store } = await freshStore();
    const { digest } = await store.publishBytes(SMALL);
    const uri = `artifact://${digest}`;
    const path = store.layout.blobPath(digest);
    expect((await store.readPage(uri)).totalLines).toBe(3);
    const { atime, mtime } = await fsp.stat(path);
    await fsp.writeFile(`${path}.swap`, SMALL.replace('beta', 'BETA'));
    await fsp.utimes(`${path}.swap`, atime, mtime);
    await fsp.rename(`${path}.swap`, path);
    await expect(store.readPage(uri)).rejects.toMatchObject({ code: 'EINTEGRITY' });
  });

  it('recovers once a corrupt blob is republished with the right content', async () => {
    const { store } = await freshStore();
    const { digest } = await store.publishBytes(SMALL);
    await fsp.truncate(store.layout.blobPath(digest), 4);
    await expect(store.readPage(`artifact://${digest}`)).rejects.toMatchObject({ code: 'EINTEGRITY' });
    await store.publishBytes(SMALL);
    expect((await store.readPage(`artifact://${digest}`)).content).toBe(SMALL);
  });

  it('lets concurrent first reads of one blob share a single verification pass', async () => {
    const { dir, store } = await freshStore();
    const { digest, bytes } = await store.publishBytes(LARGE);
    const reader = await Store.open(dir);
    const { result, bytesRead } = await countBytesRead(() =>
      Promise.all(
        Array.from({ length: 6 }, (_, i) => reader.readPage(`artifact://${digest}`, { offset: i, limit: 1 })),
      ),
    );
    expect(result.map((p) => p.content)).toEqual(Array(6).fill('a line of the large blob\n'));
    expect(bytesRead).toBeLessThan(2 * bytes);
    expect(await filesUnder(reader.layout.tmp)).toEqual([]);
  });
});
