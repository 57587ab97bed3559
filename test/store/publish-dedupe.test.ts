import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { Store } from '../../store/store.js';
import { filesUnder, fsError, ioWith, sha256, tempDir, tempStore, tmpEntries } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

const run = promisify(execFile);

describe('blob publication', () => {
  it('stores content at blobs/sha256/<2 hex>/<62 hex>, mode 0600, under its SHA-256', async () => {
    const store = await tempStore();
    const content = 'hello\nworld\n';
    const info = await store.publishBytes(content);
    const digest = sha256(content);
    expect(info).toEqual({ digest, bytes: 12, lines: 2, deduplicated: false });
    const path = join(store.root, 'blobs', 'sha256', digest.slice(0, 2), digest.slice(2));
    expect(store.layout.blobPath(digest)).toBe(path);
    expect(await fsp.readFile(path, 'utf8')).toBe(content);
    expect((await fsp.stat(path)).mode & 0o777).toBe(0o600);
    expect(await tmpEntries(store)).toEqual([]);
  });

  it('hashes streamed chunks to the same digest as the whole content, and counts lines by the shared rule', async () => {
    const store = await tempStore();
    const w = store.writer();
    for (const part of ['ab', 'c\nd', 'é', '\n', '😀']) await w.write(Buffer.from(part));
    const info = await w.commit();
    expect(info.digest).toBe(sha256('abc\ndé\n😀'));
    expect(info.lines).toBe(3);
    expect(info.bytes).toBe(Buffer.byteLength('abc\ndé\n😀'));
  });

  it('publishes the empty blob (0 bytes, 0 lines)', async () => {
    const store = await tempStore();
    const info = await store.publishBytes('');
    expect(info).toEqual({ digest: sha256(''), bytes: 0, lines: 0, deduplicated: false });
    expect((await fsp.stat(store.layout.blobPath(info.digest))).size).toBe(0);
  });

  it('deduplicates existing content without rewriting it and refreshes its mtime', async () => {
    const store = await tempStore();
    const first = await store.publishBytes('same bytes\n');
    const path = store.layout.blobPath(first.digest);
    const old = new Date('2001-01-01T00:00:00Z');
    await fsp.utimes(path, old, old);
    const before = await fsp.stat(path);
    const second = await store.publishBytes('same bytes\n');
    const after = await fsp.stat(path);
    expect(second).toEqual({ ...first, deduplicated: true });
    expect(after.ino).toBe(before.ino);
    expect(before.mtimeMs).toBe(old.getTime());
    expect(after.mtimeMs).toBeGreaterThan(Date.now() - 60_000);
    expect(await tmpEntries(store)).toEqual([]);
  });

  it('replaces a same-named blob of the wrong size instead of deduplicating against it', async () => {
    const store = await tempStore();
    const info = await store.publishBytes('content\n');
    await fsp.truncate(store.layout.blobPath(info.digest), 3);
    const again = await store.publishBytes('content\n');
    expect(again.deduplicated).toBe(false);
    expect(await fsp.readFile(store.layout.blobPath(info.digest), 'utf8')).toBe('content\n');
  });

  it('publishes its own copy when the existing blob disappears between the check and the mtime refresh', async () => {
    // Regression: a GC removing the blob at that moment made the publish fail with EDISK (ENOENT from utimes).
    const dir = await tempDir();
    const io = ioWith({
      utimes: async (path) => {
        await fsp.unlink(path);
        throw fsError('ENOENT', 'utime');
      },
    });
    const store = await Store.open(dir, { io });
    const first = await store.publishBytes('raced\n');
    const second = await store.publishBytes('raced\n');
    expect(second).toEqual({ ...first, deduplicated: false });
    expect(await fsp.readFile(store.layout.blobPath(first.digest), 'utf8')).toBe('raced\n');
    expect(await tmpEntries(store)).toEqual([]);
  });

  it('accepts a caller digest that matches and rejects one that does not with EDIGESTMISMATCH, publishing nothing', async () => {
    const store = await tempStore();
    const digest = sha256('abc');
    await expect(store.publishBytes('abc', digest)).resolves.toMatchObject({ digest });
    const wrong = sha256('abd');
    const err = await store.publishBytes('abd!', wrong).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'EDIGESTMISMATCH', details: { expected: wrong, actual: sha256('abd!') } });
    expect(await store.hasBlob(wrong)).toBe(false);
    expect(await store.hasBlob(sha256('abd!'))).toBe(false);
    expect(await tmpEntries(store)).toEqual([]);
  });

  it('refuses new writers after close with ECLOSED', async () => {
    const store = await tempStore();
    await store.close();
    expect(() => store.writer()).toThrow(expect.objectContaining({ code: 'ECLOSED' }));
  });

  it('turns concurrent identical publishes into one blob, no leftovers, no EEXIST', async () => {
    const store = await tempStore();
    // Over 1 MiB, so each publish also places a line index.
    const content = Buffer.from('concurrent line\n'.repeat(100_000));
    const results = await Promise.allSettled(Array.from({ length: 24 }, () => store.publishBytes(content)));
    expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    const digest = sha256(content);
    for (const r of results) expect(r).toMatchObject({ status: 'fulfilled', value: { digest, bytes: content.length } });
    expect(await filesUnder(store.layout.blobs)).toEqual([join(digest.slice(0, 2), digest.slice(2))]);
    expect(await filesUnder(store.layout.index)).toEqual([join(digest.slice(0, 2), `${digest.slice(2)}.idx`)]);
    expect(await tmpEntries(store)).toEqual([]);
    expect(await store.readPage(`artifact://${digest}`, { offset: 99_999 })).toMatchObject({
      content: 'concurrent line\n',
      totalLines: 100_000,
      nextOffset: null,
    });
  });

  it('turns identical publishes from several processes at once into one blob, no leftovers, no EEXIST', async () => {
    const dir = await tempDir();
    const storeModule = new URL('../../dist/store/store.js', import.meta.url).href;
    const script = `
      const { Store } = await import(${JSON.stringify(storeModule)});
      const store = await Store.open(process.argv[1]);
      const content = Buffer.from('x'.repeat(1 << 16) + '\\n');
      for (let i = 0; i < 20; i++) await store.publishBytes(content);
    `;
    const procs = Array.from({ length: 4 }, () => run(process.execPath, ['--input-type=module', '-e', script, dir]));
    const outcomes = await Promise.allSettled(procs);
    expect(outcomes.map((o) => (o.status === 'rejected' ? String(o.reason) : 'ok'))).toEqual(['ok', 'ok', 'ok', 'ok']);
    const digest = sha256(`${'x'.repeat(1 << 16)}\n`);
    const store = await Store.open(dir);
    expect(await filesUnder(store.layout.blobs)).toEqual([join(digest.slice(0, 2), digest.slice(2))]);
    expect(await tmpEntries(store)).toEqual([]);
    expect((await store.verify()).corrupt).toEqual([]);
  });
});
