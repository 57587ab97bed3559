import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { encodeManifest } from '../../store/manifest.js';
import { Store } from '../../store/store.js';
import { verifyStore } from '../../store/verify.js';
import { filesUnder, flipBit, sha256, tempDir, tempStore } from './helpers.js';

// These tests damage, remove or count blob files: every blob gets a file of its own here (packs are
// attacked in test/store/packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

describe('store verification', () => {
  it('reports an empty store as clean', async () => {
    const store = await tempStore();
    expect(await store.verify()).toEqual({
      scanned: 0,
      ok: 0,
      corrupt: [],
      missing: [],
      tombstoned: [],
      unexpected: [],
      quarantined: [],
      repairFailed: [],
      packed: 0,
      tornPacks: [],
      unreadablePacks: [],
    });
  });

  it('hashes every blob and reports a clean store, manifests included', async () => {
    const store = await tempStore();
    const out = await store.publishBytes('out\n');
    const big = await store.publishBytes(Buffer.alloc(3 * 1024 * 1024, 0x41));
    const manifest = await store.publishBytes(
      encodeManifest([{ name: 'stdout', digest: out.digest, bytes: out.bytes, lines: out.lines }]),
    );
    expect(big.digest).not.toBe(manifest.digest);
    expect(await store.verify()).toEqual({
      scanned: 3,
      ok: 3,
      corrupt: [],
      missing: [],
      tombstoned: [],
      unexpected: [],
      quarantined: [],
      repairFailed: [],
      packed: 0,
      tornPacks: [],
      unreadablePacks: [],
    });
  });

  it('lists truncated, extended and bit-flipped blobs as corrupt (sorted) and removes nothing', async () => {
    const dir = await tempDir();
    const store = await Store.open(dir);
    const good = await store.publishBytes('good\n');
    const bad = await Promise.all(['truncate me\n', 'extend me\n', 'flip me\n'].map((c) => store.publishBytes(c)));
    const [t, e, f] = bad.map((b) => store.layout.blobPath(b.digest)) as [string, string, string];
    await fsp.truncate(t, 3);
    await fsp.appendFile(e, 'junk');
    await flipBit(f, 2, 5);
    const before = await filesUnder(dir);
    const report = await verifyStore(await Store.open(dir));
    expect(report).toEqual({
      scanned: 4,
      ok: 1,
      corrupt: bad.map((b) => b.digest).sort(),
      missing: [],
      tombstoned: [],
      unexpected: [],
      quarantined: [],
      repairFailed: [],
      packed: 0,
      tornPacks: [],
      unreadablePacks: [],
    });
    expect(await filesUnder(dir)).toEqual(before);
    expect(await fsp.readFile(t, 'utf8')).toBe('tru');
    expect(good.digest).toBe(sha256('good\n'));
  });

  it('lists blobs that manifests reference but the store lacks as missing', async () => {
    const store = await tempStore();
    const kept = await store.publishBytes('kept\n');
    const lost = await store.publishBytes('lost\n');
    const never = sha256('never stored');
    await store.publishBytes(
      encodeManifest([
        { name: 'stdout', digest: kept.digest, bytes: 5, lines: 1 },
        { name: 'stderr', digest: lost.digest, bytes: 5, lines: 1 },
        { name: 'extra', digest: never, bytes: 12, lines: 1 },
      ]),
    );
    await fsp.unlink(store.layout.blobPath(lost.digest));
    const report = await store.verify();
    expect(report).toMatchObject({ scanned: 2, ok: 2, corrupt: [] });
    expect(report.missing).toEqual([lost.digest, never].sort());
  });

  it('does not follow the references of a corrupt manifest', async () => {
    const store = await tempStore();
    const never = sha256('never stored');
    const m = await store.publishBytes(encodeManifest([{ name: 'stdout', digest: never, bytes: 1, lines: 1 }]));
    await fsp.appendFile(store.layout.blobPath(m.digest), ' ');
    expect(await store.verify()).toMatchObject({ scanned: 1, ok: 0, corrupt: [m.digest], missing: [] });
  });

  it('lists entries that are not blob names as unexpected and leaves them alone', async () => {
    const store = await tempStore();
    await store.publishBytes('x\n');
    await fsp.writeFile(join(store.layout.blobs, 'README'), 'not a blob');
    await fsp.mkdir(join(store.layout.blobs, 'zz'));
    await fsp.mkdir(join(store.layout.blobs, 'ab'), { recursive: true });
    await fsp.writeFile(join(store.layout.blobs, 'ab', 'short'), '');
    const report = await store.verify();
    expect(report).toMatchObject({ scanned: 1, ok: 1, corrupt: [], missing: [] });
    expect(report.unexpected).toEqual(
      [join('blobs', 'sha256', 'README'), join('blobs', 'sha256', 'ab', 'short'), join('blobs', 'sha256', 'zz')].sort(),
    );
    expect(await fsp.readFile(join(store.layout.blobs, 'README'), 'utf8')).toBe('not a blob');
  });
});
