/**
 * A directory store's blob count and bytes: a walk of blobs/ one shard
 * directory at a time, then the packs' locations, each digest counted once.
 * Memory stays what the store already holds: packed blobs are counted from
 * the store's own map of them (refreshed here, one place per digest), and
 * a blob file is checked against that map, so no set of every digest is
 * built.
 */
import { join } from 'node:path';
import type { PackIndex } from '../pack-index.js';
import type { Store } from '../store.js';

const SHARD = /^[0-9a-f]{2}$/;
const BLOB_REST = /^[0-9a-f]{62}$/;

/** The blobs of `store` (its packs in `packed`) and their bytes. */
export async function directoryTotals(store: Store, packed: PackIndex): Promise<{ blobs: number; bytes: number }> {
  await packed.refresh().catch(() => {});
  let { blobs, bytes } = packed.totals();
  const blobsDir = store.layout.blobs;
  for (const shard of await store.io.readdir(blobsDir).catch(() => [] as string[])) {
    if (!SHARD.test(shard)) continue;
    for (const name of await store.io.readdir(join(blobsDir, shard)).catch(() => [] as string[])) {
      if (!BLOB_REST.test(name)) continue;
      // Packed as well (a threshold changed, a file published before packs): counted once, as packed.
      if (packed.known(shard + name)) continue;
      const st = await store.io.lstat(join(blobsDir, shard, name)).catch(() => undefined);
      if (!st?.isFile()) continue;
      blobs++;
      bytes += st.size;
    }
  }
  return { blobs, bytes };
}
