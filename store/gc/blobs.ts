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
import { type BlobHandle, fileHandle, openBlob } from '../blob-handle.js';
import { openPackedAt } from '../directory/read.js';
import { READ_STORE_FILE } from '../file.js';
import { verifyOpened } from '../integrity.js';
import { MANIFEST_KIND, MAX_MANIFEST_BYTES } from '../manifest.js';
import { decodeVerified, tryLoadManifest, tryLoadManifestAt } from '../manifest-load.js';
import { readdirOrEmpty } from '../owned-files.js';
import type { PackEntry } from '../pack-format.js';
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
 * True when the blob behind `open` may be a manifest: a regular file of at
 * most MAX_MANIFEST_BYTES that starts as every canonical manifest does.
 * Most small blobs are not manifests, and their first bytes tell without
 * reading or hashing the rest. Gone, or a symbolic link (ELOOP): not a
 * manifest this store wrote.
 */
async function mayBeManifest(open: () => Promise<BlobHandle | undefined>): Promise<boolean> {
  let h: BlobHandle | undefined;
  try {
    h = await open();
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ENOENT' || code === 'ELOOP' || code === 'ENOTFOUND' || code === 'EINTEGRITY') return false;
    throw toSluiceError(err, 'EDISK');
  }
  if (!h) return false;
  try {
    const st = await h.identity();
    if (!st.isFile || st.size > MAX_MANIFEST_BYTES) return false;
    const head = Buffer.alloc(MANIFEST_PREFIX.length);
    const { bytesRead } = await h.read(head, 0, head.length, 0);
    return bytesRead === head.length && head.equals(MANIFEST_PREFIX);
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  } finally {
    await h.close();
  }
}

/** Stream digests of a verified blob that is a manifest, or none (corrupt, missing, or not a manifest). */
async function streamsOf(load: () => Promise<{ streams: { digest: string }[] } | undefined>): Promise<string[]> {
  try {
    return (await load())?.streams.map((s) => s.digest) ?? [];
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ENOTFOUND' || code === 'EINTEGRITY') return [];
    throw toSluiceError(err, 'EDISK');
  }
}

/**
 * The stream digests of blob `digest` when it is an intact manifest, else
 * none: a corrupt blob references nothing, a missing one neither. Without
 * `path`, the blob is read wherever the store keeps it (store/blob-handle.ts:
 * a file, a pack, a tombstone); with it, only the file at `path` (a
 * tombstone) is.
 *
 * @throws DiskError (EDISK) when the blob exists but cannot be read.
 */
export async function manifestStreams(store: Store, digest: string, path?: string): Promise<string[]> {
  if (path === undefined) {
    if (!(await mayBeManifest(() => openBlob(store, digest)))) return [];
    return streamsOf(() => tryLoadManifest(store, digest));
  }
  const at = path;
  const open = async () => fileHandle(await store.io.open(at, READ_STORE_FILE));
  if (!(await mayBeManifest(open))) return [];
  return streamsOf(() => tryLoadManifestAt(store, digest, at));
}

/** {@link manifestStreams} of the packed copy `e` of `digest` in the pack at `packPath` (moved aside or not). */
export async function packedManifestStreams(
  store: Store,
  digest: string,
  packPath: string,
  e: PackEntry,
): Promise<string[]> {
  const loc = { path: packPath, offset: e.offset, length: e.length };
  if (!(await mayBeManifest(() => openPackedAt(store, digest, loc)))) return [];
  return streamsOf(async () => {
    const h = await openPackedAt(store, digest, loc);
    return h ? decodeVerified(await verifyOpened(store, digest, h)) : undefined;
  });
}

/**
 * Whether a file last modified at `mtimeMs` is inside the grace period at
 * `now`. A grace period of 0 holds nothing: an mtime has sub-millisecond
 * precision and `Date.now()` does not, so a file written in the current
 * millisecond would otherwise read as written in the future, and young.
 */
export function insideGrace(now: number, mtimeMs: number, graceMs: number): boolean {
  return graceMs > 0 && now - mtimeMs < graceMs;
}
