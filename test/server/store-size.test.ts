/**
 * The store walk behind `GET /v1/store` and the store gauges of
 * `GET /v1/metrics` (server/store-size.ts): every blob once, whether
 * it is a file, packed, or both, counted from the store's own map of its
 * packed blobs, so a walk builds no set of every digest and an unchanged
 * pack is not read again.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { walkStore } from '../../server/store-size.js';
import { Store } from '../../store/store.js';
import { tempDir, tmpEntries } from '../store/helpers.js';
import { FaultyIO } from '../support/faulty-io.js';

const PACKED = { packMaxBlobBytes: 64 * 1024 };

describe('the store walk', () => {
  it('counts each blob once (file, packed, in two packs, or both) and reads no unchanged pack again', async () => {
    const dir = join(await tempDir(), 'store');
    const a = await Store.open(dir, PACKED);
    const c = await Store.open(dir, PACKED);
    await c.publishBytes('two\n');
    await a.publishBytes('one\n');
    await a.publishBytes('both\n');
    // C read the packs at its first publish, before A had one: 'one' goes into C's pack too.
    expect((await c.publishBytes('one\n')).deduplicated).toBe(false);
    await a.close();
    await c.close();
    // A store without packs gives 'both' a file as well.
    const b = await Store.open(dir, { packMaxBlobBytes: 0 });
    await b.publishBytes('both\n');
    await b.publishBytes('x'.repeat(100_000));
    await b.close();
    const io = new FaultyIO(dir);
    const store = await Store.open(dir, { ...PACKED, io });
    const first = await walkStore(store);
    expect({ blobs: first.blobs, bytes: first.bytes }).toEqual({ blobs: 4, bytes: 4 + 5 + 100_000 + 4 });
    io.log.length = 0;
    const second = await walkStore(store);
    expect({ blobs: second.blobs, bytes: second.bytes }).toEqual({ blobs: 4, bytes: 4 + 5 + 100_000 + 4 });
    expect(io.log.filter((r) => r.role === 'pack-index')).toEqual([]);
    await store.close();
    expect(await tmpEntries(store)).toEqual([]);
  });
});
