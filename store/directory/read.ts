/** Opening a directory store's blob (file, pack window or tombstone); store/integrity.ts hashes it before use. */
import { join } from 'node:path';
import { IntegrityError, NotFoundError, toSluiceError } from '../../engine/protocol/errors.js';
import { assertDigest, type BlobHandle, fileHandle } from '../blob-handle.js';
import { READ_STORE_FILE, type StoreFile } from '../file.js';
import { decodeRecordHeader, RECORD_HEADER_BYTES } from '../pack-format.js';
import { type PackIndex, type PackLocation, packNames, readPack } from '../pack-index.js';
import type { Store } from '../store.js';
import { openTombstoned } from '../tombstone.js';

// A record never changes once written, so its identity is the pack's and the window's place.
function windowHandle(fh: StoreFile, loc: PackLocation): BlobHandle {
  return {
    read: async (buffer, offset, length, position) => {
      const n = Math.max(0, Math.min(length, loc.length - position));
      if (n === 0) return { bytesRead: 0, buffer };
      return fh.read(buffer, offset, n, loc.offset + position);
    },
    identity: async () => {
      const st = await fh.stat({ bigint: true });
      return {
        key: `pack:${st.dev}:${st.ino}:${loc.offset}:${loc.length}`,
        size: loc.length,
        isFile: st.isFile(),
        ino: Number(st.ino),
      };
    },
    packed: loc,
    close: () => fh.close(),
  };
}

const codeOf = (err: unknown) => (err as { code?: unknown }).code;

/** Undefined when the pack is gone or its record is not `digest`'s (a stale index); never opens through a FIFO or link. */
export async function openPackedAt(store: Store, digest: string, loc: PackLocation): Promise<BlobHandle | undefined> {
  let fh: StoreFile;
  try {
    fh = await store.io.open(loc.path, READ_STORE_FILE);
  } catch (err) {
    if (codeOf(err) === 'ENOENT' || codeOf(err) === 'ELOOP') return undefined;
    throw toSluiceError(err, 'EDISK');
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) return undefined;
    const h = Buffer.alloc(RECORD_HEADER_BYTES);
    const { bytesRead } = await fh.read(h, 0, h.length, loc.offset - RECORD_HEADER_BYTES);
    const rec = bytesRead === h.length ? decodeRecordHeader(h) : undefined;
    if (rec?.digest !== digest || rec.length !== loc.length || loc.offset + loc.length > st.size) {
      await fh.close();
      return undefined;
    }
    return windowHandle(fh, loc);
  } catch (err) {
    await fh.close().catch(() => {});
    throw toSluiceError(err, 'EDISK');
  }
}

/** Opens `digest` from the packs `index` knows of (refreshing once on a miss or a stale location). */
export async function openPacked(store: Store, index: PackIndex, digest: string): Promise<BlobHandle | undefined> {
  for (let attempt = 0; attempt < 2; attempt++) {
    const loc = attempt === 0 ? index.known(digest) : await index.locate(digest);
    if (!loc) continue;
    const h = await openPackedAt(store, digest, loc);
    if (h) return h;
    index.forget(digest, loc);
    if (attempt === 0) await index.refresh();
  }
  return undefined;
}

/** The blob file at `digest`'s address; undefined when absent. */
async function openFileAt(store: Store, digest: string): Promise<BlobHandle | undefined> {
  try {
    return fileHandle(await store.io.open(store.layout.blobPath(digest), READ_STORE_FILE));
  } catch (err) {
    if (codeOf(err) === 'ELOOP') {
      throw new IntegrityError(`artifact ${digest} is a symbolic link in the store, not a blob`, { digest });
    }
    if (codeOf(err) === 'ENOENT') return undefined;
    throw toSluiceError(err, 'EDISK');
  }
}

/** The blob file of `digest` at its address or among the tombstones (not packs): a deduplicating publisher's check. */
export async function openBlobFile(store: Store, digest: string): Promise<BlobHandle> {
  assertDigest(digest);
  const h = (await openFileAt(store, digest)) ?? (await tombstonedFile(store, digest));
  if (!h) throw notFound(store, digest);
  return h;
}

/** A packed copy of `digest` inside a pack a collection has moved aside for a moment. */
async function openTrashPacked(store: Store, digest: string): Promise<BlobHandle | undefined> {
  for (const owner of await store.io.readdir(store.layout.trash).catch(() => [] as string[])) {
    const dir = join(store.layout.trash, owner);
    for (const name of await packNames(store, dir).catch(() => [] as string[])) {
      const r = await readPack(store, join(dir, name)).catch(() => undefined);
      const e = r?.entries.find((x) => x.digest === digest);
      if (!e) continue;
      const h = await openPackedAt(store, digest, { path: join(dir, name), offset: e.offset, length: e.length });
      if (h) return h;
    }
  }
  return undefined;
}

async function tombstonedFile(store: Store, digest: string): Promise<BlobHandle | undefined> {
  const fh = await openTombstoned(store, digest);
  return fh ? fileHandle(fh) : undefined;
}

/** The packed copy last known, else the file, else a pack added since, else a collection's tombstone. */
export async function openDirectoryBlob(store: Store, index: PackIndex, digest: string): Promise<BlobHandle> {
  const known = index.known(digest);
  if (known) {
    const h = await openPackedAt(store, digest, known);
    if (h) return h;
    index.forget(digest, known);
  }
  const h =
    (await openFileAt(store, digest)) ??
    (await openPacked(store, index, digest)) ??
    (await tombstonedFile(store, digest)) ??
    (await openTrashPacked(store, digest));
  if (!h) throw notFound(store, digest);
  return h;
}

/** For a reader whose copy failed its hash: a later publish may have added a good copy anywhere. */
export async function* otherCopies(store: Store, digest: string, except: PackLocation): AsyncGenerator<BlobHandle> {
  const file = await openFileAt(store, digest).catch(() => undefined);
  if (file) yield file;
  for (const name of await packNames(store)) {
    const path = join(store.layout.packs, name);
    const r = await readPack(store, path, undefined, false).catch(() => undefined);
    for (const e of r?.entries ?? []) {
      if (e.digest !== digest || (path === except.path && e.offset === except.offset)) continue;
      const h = await openPackedAt(store, digest, { path, offset: e.offset, length: e.length });
      if (h) yield h;
    }
  }
}

function notFound(store: Store, digest: string): NotFoundError {
  return new NotFoundError(`artifact ${digest} is not in the store at ${store.root}`, { digest });
}
