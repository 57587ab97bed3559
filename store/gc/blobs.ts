/**
 * What the collector reads of the blobs: the listing and manifests' streams.
 * Both fail closed: an unreadable shard or manifest aborts the collection
 * (EDISK), since taking it for "no blobs" or "not a manifest" would let a
 * manifest's streams be deleted while it survives. Only ENOENT is normal.
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

/** Names placed since the listing, and names in `aside` (this collection's trash) placed again. */
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

// Most small blobs are not manifests, and their first bytes tell without hashing the rest.
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
 * A blob's stream digests when it is an intact manifest, else none; with
 * `path`, only that file (a tombstone) is read. @throws EDISK when unreadable.
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

/** A grace period of 0 holds nothing: mtimes are sub-millisecond, `Date.now()` is not, so a file would read as young. */
export function insideGrace(now: number, mtimeMs: number, graceMs: number): boolean {
  return graceMs > 0 && now - mtimeMs < graceMs;
}
