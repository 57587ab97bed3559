/**
 * What the collector reads of the blobs themselves: the listing (names,
 * sizes, mtimes), and the stream digests of the blobs that are manifests.
 *
 * Both fail closed: a shard directory or a manifest that cannot be read
 * (EACCES, EIO) aborts the collection (EDISK) instead of being taken for
 * "no blobs" or "not a manifest", since either would let a manifest's
 * streams be deleted while the manifest survives. Only ENOENT (a blob
 * removed or moved aside meanwhile) is a normal answer.
 */
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { toSluiceError } from '../../engine/protocol/errors.js';
import { readdirOrEmpty } from '../../engine/sessions/roots.js';
import { READ_STORE_FILE } from '../file.js';
import { decodeManifest, MANIFEST_KIND, MAX_MANIFEST_BYTES } from '../manifest.js';
import type { Store } from '../store.js';

/** A listed blob: size and mtime as the listing saw them. */
export interface ListedBlob {
  bytes: number;
  mtimeMs: number;
}

const PREFIX = /^[0-9a-f]{2}$/;
const REST = /^[0-9a-f]{62}$/;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
/** How every canonical manifest starts (store/manifest.ts encodes `kind` first). */
const MANIFEST_PREFIX = Buffer.from(`{"kind":${JSON.stringify(MANIFEST_KIND)},`);

const isMissing = (err: unknown) => (err as { code?: unknown }).code === 'ENOENT';

/** The blob names in shard `prefix` (a missing shard has none). */
async function shardNames(store: Store, prefix: string): Promise<string[]> {
  return (await readdirOrEmpty(join(store.layout.blobs, prefix))).filter((n) => REST.test(n));
}

/** The shard directories, sorted. */
async function shards(store: Store): Promise<string[]> {
  return (await readdirOrEmpty(store.layout.blobs)).filter((p) => PREFIX.test(p)).sort();
}

/** Every blob with its size and mtime; names that are not blob names, and non-regular files, are left alone. */
export async function listBlobs(store: Store): Promise<Map<string, ListedBlob>> {
  const out = new Map<string, ListedBlob>();
  try {
    for (const prefix of await shards(store)) {
      for (const rest of await shardNames(store, prefix)) {
        let st: Awaited<ReturnType<typeof fsp.lstat>>;
        try {
          st = await fsp.lstat(join(store.layout.blobs, prefix, rest));
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
 * The stream digests of the blob at `path` (named `digest`) when it is an
 * intact manifest, else none. Read directly (at most MAX_MANIFEST_BYTES) and
 * hashed; a corrupt blob references nothing, a missing one neither.
 *
 * @throws DiskError (EDISK) when the file exists but cannot be read.
 */
export async function manifestStreamsAt(path: string, digest: string): Promise<string[]> {
  let buf: Buffer;
  let fh: fsp.FileHandle;
  try {
    fh = await fsp.open(path, READ_STORE_FILE);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    // Gone, or a symbolic link (ELOOP): not a manifest this store wrote.
    if (code === 'ENOENT' || code === 'ELOOP') return [];
    throw toSluiceError(err, 'EDISK');
  }
  try {
    const st = await fh.stat();
    if (!st.isFile() || st.size > MAX_MANIFEST_BYTES) return [];
    // Most small blobs are not manifests: their first bytes tell, without reading or hashing the rest.
    const head = Buffer.alloc(MANIFEST_PREFIX.length);
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    if (bytesRead < head.length || !head.equals(MANIFEST_PREFIX)) return [];
    buf = Buffer.alloc(st.size);
    const { bytesRead: all } = await fh.read(buf, 0, st.size, 0);
    if (all !== st.size) return [];
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  } finally {
    await fh.close();
  }
  if (createHash('sha256').update(buf).digest('hex') !== digest) return [];
  let text: string;
  try {
    text = strictUtf8.decode(buf);
  } catch {
    return [];
  }
  return decodeManifest(text)?.streams.map((s) => s.digest) ?? [];
}

/** {@link manifestStreamsAt} for the blob at its address. */
export function manifestStreams(store: Store, digest: string): Promise<string[]> {
  return manifestStreamsAt(store.layout.blobPath(digest), digest);
}
