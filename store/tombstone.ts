/**
 * Reading a blob that a garbage collection has moved aside for a moment.
 *
 * GC deletes by tombstoning (store/gc/sweep.ts): it renames a
 * candidate into `gc/trash/<owner>/<digest>`, re-reads the pins, and puts the
 * blob back when a publisher pinned or refreshed it meanwhile. For that
 * instant the blob is not at its address, though it may be live. A reader
 * that misses a blob therefore also looks among the tombstones, and then at
 * the address once more (a restore may have moved it back in between). The
 * content is verified against its digest as usual, and an open descriptor
 * stays valid even if the tombstone is unlinked afterwards. What is opened
 * may not be a regular file: the caller checks (store/file.ts, READ_STORE_FILE).
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { READ_STORE_FILE, type StoreFile } from './file.js';
import { packNames, readPack } from './pack-index.js';
import type { Store } from './store.js';

/** Opens the blob `digest` from a tombstone, or from its address if it was restored meanwhile; undefined when neither. */
export async function openTombstoned(store: Store, digest: string): Promise<StoreFile | undefined> {
  let owners: string[];
  try {
    owners = await fsp.readdir(store.layout.trash);
  } catch {
    owners = [];
  }
  for (const owner of owners) {
    try {
      return await store.io.open(join(store.layout.trash, owner, digest), READ_STORE_FILE);
    } catch {
      // Not in this one.
    }
  }
  try {
    return await store.io.open(store.layout.blobPath(digest), READ_STORE_FILE);
  } catch {
    return undefined;
  }
}

/**
 * Digests among `digests` that are not at their address but lie among the
 * tombstones (of a collection running now, or of one that died mid-sweep,
 * which the next collection puts back). Readers find them there.
 */
export async function tombstoned(store: Store, digests: Iterable<string>): Promise<Set<string>> {
  const found = new Set<string>();
  let owners: string[];
  try {
    owners = await fsp.readdir(store.layout.trash);
  } catch {
    return found;
  }
  const wanted = new Set(digests);
  // Packs a collection moved aside hold blobs too (store/gc/repack.ts).
  for (const owner of owners) {
    const dir = join(store.layout.trash, owner);
    for (const name of await packNames(store, dir).catch(() => [] as string[])) {
      const r = await readPack(store, join(dir, name)).catch(() => undefined);
      for (const e of r?.entries ?? []) if (wanted.has(e.digest)) found.add(e.digest);
    }
  }
  for (const d of wanted) {
    if (found.has(d)) continue;
    for (const owner of owners) {
      try {
        if ((await fsp.lstat(join(store.layout.trash, owner, d))).isFile()) {
          found.add(d);
          break;
        }
      } catch {
        // Not in this one.
      }
    }
  }
  return found;
}
