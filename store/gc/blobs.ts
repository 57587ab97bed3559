/**
 * What the collector reads of the blobs themselves: the listing (names,
 * sizes, mtimes), and the stream digests of the blobs that are manifests
 * (through the manifest loader, store/manifest-load.ts). All of it through
 * the store's {@link StoreIO}.
 *
 * Both fail closed: a shard directory or a manifest that cannot be read
 * (EACCES, EIO) aborts the collection (EDISK) instead of being taken for
 * "no blobs" or "not a manifest", since either would let a manifest's
 * streams be deleted while the manifest survives. Only ENOENT (a blob
 * removed or moved aside meanwhile) is a normal answer.
 */
import { join } from 'node:path';
import { toSluiceError } from '../../engine/protocol/errors.js';
import { READ_STORE_FILE, type StoreFile } from '../file.js';
import { MANIFEST_KIND, MAX_MANIFEST_BYTES } from '../manifest.js';
import { tryLoadManifestAt } from '../manifest-load.js';
import { readdirOrEmpty } from '../owned-files.js';
import type { Store } from '../store.js';

/** A listed blob: size and mtime as the listing saw them. */
export interface ListedBlob {
  bytes: number;
  mtimeMs: number;
}

const PREFIX = /^[0-9a-f]{2}$/;
const REST = /^[0-9a-f]{62}$/;
/** How every canonical manifest starts (store/manifest.ts encodes `kind` first). */
const MANIFEST_PREFIX = Buffer.from(`{"kind":${JSON.stringify(MANIFEST_KIND)},`);

const isMissing = (err: unknown) => (err as { code?: unknown }).code === 'ENOENT';

/** The blob names in shard `prefix` (a missing shard has none). */
async function shardNames(store: Store, prefix: string): Promise<string[]> {
  return (await readdirOrEmpty(store.io, join(store.layout.blobs, prefix))).filter((n) => REST.test(n));
}

/** The shard directories, sorted. */
async function shards(store: Store): Promise<string[]> {
  return (await readdirOrEmpty(store.io, store.layout.blobs)).filter((p) => PREFIX.test(p)).sort();
}

/** Every blob with its size and mtime; names that are not blob names, and non-regular files, are left alone. */
export async function listBlobs(store: Store): Promise<Map<string, ListedBlob>> {
  const out = new Map<string, ListedBlob>();
  try {
    for (const prefix of await shards(store)) {
      for (const rest of await shardNames(store, prefix)) {
        let st: Awaited<ReturnType<Store['io']['lstat']>>;
        try {
          st = await store.io.lstat(join(store.layout.blobs, prefix, rest));
        } catch (err) {
          if (isMissing(err)) continue;
          throw err;
        }
        if (!st.isFile()) continue;
        out.set(prefix + rest, { bytes: st.size, mtimeMs: st.mtimeMs });
      }
    }
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  }
  return out;
}

/**
 * Blobs at their address now that the listing did not account for: names it
 * did not list (placed since), and names in `aside` (moved to the trash by
 * this collection) that a publisher has placed again.
 */
export async function placedSince(
  store: Store,
  listed: ReadonlyMap<string, ListedBlob>,
  aside: ReadonlySet<string>,
): Promise<string[]> {
  const out: string[] = [];
  try {
    for (const prefix of await shards(store)) {
      for (const rest of await shardNames(store, prefix)) {
        const d = prefix + rest;
        if (!listed.has(d) || aside.has(d)) out.push(d);
      }
    }
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  }
  return out;
}

/**
 * True when the file at `path` may be a manifest: a regular file of at most
 * MAX_MANIFEST_BYTES that starts as every canonical manifest does. Most
 * small blobs are not manifests, and their first bytes tell without
 * reading or hashing the rest. Gone, or a symbolic link (ELOOP): not a
 * manifest this store wrote.
 */
async function mayBeManifest(store: Store, path: string): Promise<boolean> {
  let fh: StoreFile;
  try {
    fh = await store.io.open(path, READ_STORE_FILE);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ENOENT' || code === 'ELOOP') return false;
    throw toSluiceError(err, 'EDISK');
  }
  try {
    const st = await fh.stat();
    if (!st.isFile() || st.size > MAX_MANIFEST_BYTES) return false;
    const head = Buffer.alloc(MANIFEST_PREFIX.length);
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    return bytesRead === head.length && head.equals(MANIFEST_PREFIX);
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  } finally {
    await fh.close();
  }
}

/**
 * The stream digests of the copy of blob `digest` at `path` (its address
 * unless given, or a tombstone) when it is an intact manifest, else none:
 * a corrupt blob references nothing, a missing one neither.
 *
 * @throws DiskError (EDISK) when the file exists but cannot be read.
 */
export async function manifestStreams(
  store: Store,
  digest: string,
  path = store.layout.blobPath(digest),
): Promise<string[]> {
  if (!(await mayBeManifest(store, path))) return [];
  try {
    return (await tryLoadManifestAt(store, digest, path))?.streams.map((s) => s.digest) ?? [];
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ENOTFOUND' || code === 'EINTEGRITY') return [];
    throw toSluiceError(err, 'EDISK');
  }
}
