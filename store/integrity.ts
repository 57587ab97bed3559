/**
 * A blob is trusted only once its whole content has hashed to its name. A
 * store remembers what it verified keyed by digest and the identity of the
 * hashed file (store/verified.ts), so a blob modified or replaced later is
 * hashed again. The same pass counts lines and checks or rebuilds a large
 * blob's line index, so a first read costs one sequential read.
 */
import { createHash } from 'node:crypto';
import { BadUriError, IntegrityError, NotFoundError, toSluiceError } from '../engine/protocol/errors.js';
import { type BlobHandle, fileHandle, openBlob } from './blob-handle.js';
import { READ_STORE_FILE, type StoreFile } from './file.js';
import { IndexBuilder, IndexComparer, probeIndexHeader, wantsIndex } from './index-file.js';
import { LineScanner } from './line-index.js';
import type { Store } from './store.js';
import { isDigest } from './uri.js';

/** A blob opened for reading whose content matched its digest. */
export interface VerifiedBlob {
  /** SHA-256 of the content, 64 lowercase hex. */
  readonly digest: string;
  /** The open blob (a file, or a window into a pack: store/blob-handle.ts); close it with {@link close}. */
  readonly handle: BlobHandle;
  /** Size in bytes. */
  readonly bytes: number;
  /** Lines by the shared line rule. */
  readonly lines: number;
  /** Closes the descriptor (idempotent). */
  close(): Promise<void>;
}

/** The outcome of hashing one blob file, for {@link verifyStore}-style audits. */
export type BlobCheck =
  | { status: 'ok'; bytes: number; lines: number }
  | {
      status: 'corrupt';
      actual: string;
      bytes: number /** The inode found corrupt (a repair moves only that file). */;
      ino?: number;
    }
  | { status: 'missing' };

/** Read size of the hashing pass: large reads keep syscalls off the profile. */
const HASH_CHUNK = 1024 * 1024;
/** Hand index entries to the builder once this many are pending, so memory stays flat. */
const SPILL_ENTRIES = 4096;
/** The identity of the blob behind `h`: a later write, truncate, utimes or replacement changes it. */
function fileKey(h: BlobHandle): Promise<{ key: string; size: number; isFile: boolean; ino: number }> {
  return h.identity();
}

function lstatOrUndefined(store: Store, path: string): Promise<{ ino: number } | undefined> {
  return store.io.lstat(path).then(
    (st) => ({ ino: st.ino }),
    () => undefined,
  );
}

// The next read is in flight while `onChunk` runs; a chunk is valid only during the call.
async function readSequentially(
  fh: Pick<BlobHandle, 'read'>,
  onChunk: (chunk: Buffer) => void | Promise<void>,
  chunkSize = HASH_CHUNK,
): Promise<number> {
  const bufs = [Buffer.allocUnsafe(chunkSize), Buffer.allocUnsafe(chunkSize)] as const;
  let which = 0;
  let position = 0;
  let pending = fh.read(bufs[0], 0, chunkSize, 0);
  try {
    for (;;) {
      const { bytesRead } = await pending;
      if (bytesRead === 0) return position;
      const current = bufs[which as 0 | 1];
      position += bytesRead;
      which ^= 1;
      pending = fh.read(bufs[which as 0 | 1], 0, chunkSize, position);
      await onChunk(current.subarray(0, bytesRead));
    }
  } catch (err) {
    // Never leave a read running (or rejecting unobserved) behind a failure.
    await pending.catch(() => {});
    throw err;
  }
}

function corrupt(digest: string, actual: string, bytes: number): IntegrityError {
  return new IntegrityError(
    `artifact ${digest} is corrupt: its ${bytes} bytes hash to ${actual}; the store holds damaged content under this name`,
    { digest, actual, bytes },
  );
}

// An index that fails the check is rebuilt with a second, hash-free pass.
async function verifyPass(store: Store, digest: string, fh: BlobHandle, size: number): Promise<number> {
  const hash = createHash('sha256');
  const scanner = new LineScanner();
  const indexed = wantsIndex(size);
  const header = indexed ? await probeIndexHeader(store, digest, size) : undefined;
  const comparer = indexed && header ? new IndexComparer() : undefined;
  const builder = indexed && !header ? new IndexBuilder(store) : undefined;
  try {
    const total = await readSequentially(fh, async (chunk) => {
      hash.update(chunk);
      scanner.push(chunk);
      if (scanner.pendingEntries >= SPILL_ENTRIES) {
        const entries = scanner.takeEntries();
        comparer?.add(entries);
        await builder?.add(entries);
      }
    });
    const actual = hash.digest('hex');
    if (actual !== digest || total !== size) throw corrupt(digest, actual, total);
    const rest = scanner.takeEntries();
    comparer?.add(rest);
    await builder?.add(rest);
    if (builder) await builder.finish(digest, size, scanner.lines);
    else if (comparer && !(await comparer.matches(store, digest, size, scanner.lines))) {
      await rebuildIndex(store, digest, fh, size);
    }
    return scanner.lines;
  } finally {
    await builder?.abort();
  }
}

/** True when a new index was placed; failures are ignored, the index being a cache. */
export async function rebuildIndex(store: Store, digest: string, fh: BlobHandle, size: number): Promise<boolean> {
  if (!wantsIndex(size)) return false;
  const scanner = new LineScanner();
  const builder = new IndexBuilder(store);
  try {
    const total = await readSequentially(fh, async (chunk) => {
      scanner.push(chunk);
      if (scanner.pendingEntries >= SPILL_ENTRIES) await builder.add(scanner.takeEntries());
    });
    // A blob that changed since it was verified gets no index; the next read re-verifies it.
    if (total !== size) return false;
    await builder.add(scanner.takeEntries());
    return await builder.finish(digest, size, scanner.lines);
  } catch {
    return false;
  } finally {
    await builder.abort();
  }
}

/**
 * Opens blob `digest` once its content matches its name, hashed unless this
 * store verified that very file; concurrent first reads share one pass.
 * @throws ENOTFOUND; EINTEGRITY for other content or not a regular file.
 */
export async function openVerifiedBlob(store: Store, digest: string): Promise<VerifiedBlob> {
  const h = await openBlob(store, digest);
  try {
    return await verifyOpened(store, digest, h);
  } catch (err) {
    const bad = h.packed;
    if (!(err instanceof IntegrityError)) throw err;
    // A damaged local copy of an S3 blob (store/s3/read-cache.ts) is removed, and the object read instead.
    if (!bad && (await store.backend.dropCached(digest))) {
      return verifyOpened(store, digest, await openBlob(store, digest));
    }
    const packs = store.backend.packs;
    if (!bad || !packs) throw err;
    // A damaged packed copy: another copy (published again since) may be good; it is then the one remembered.
    for await (const other of packs.otherCopies(digest, bad)) {
      try {
        const v = await verifyOpened(store, digest, other);
        // Found by scanning: readable, but not known durable.
        if (other.packed) packs.index.add(other.packed.path, { digest, ...other.packed }, false);
        return v;
      } catch {
        // Damaged too, or gone: the next one.
      }
    }
    throw err;
  }
}

/** {@link openVerifiedBlob} of the copy at `path` (a collection's tombstone) and nowhere else. */
export async function openVerifiedAt(store: Store, digest: string, path: string): Promise<VerifiedBlob> {
  if (!isDigest(digest)) throw new BadUriError(`${JSON.stringify(digest)} is not a 64-character lowercase hex digest`);
  let handle: StoreFile;
  try {
    handle = await store.io.open(path, READ_STORE_FILE);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'ELOOP') throw new IntegrityError(`${path} is a symbolic link in the store, not a blob`, { digest });
    if (code === 'ENOENT') throw new NotFoundError(`${path} is not in the store`, { digest });
    throw toSluiceError(err, 'EDISK');
  }
  return verifyOpened(store, digest, fileHandle(handle));
}

/** Checks that the open file `handle` holds the content `digest` names (see {@link openVerifiedBlob}). */
export async function verifyOpened(store: Store, digest: string, handle: BlobHandle): Promise<VerifiedBlob> {
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await handle.close().catch(() => {});
  };
  try {
    const { key, size, isFile } = await fileKey(handle);
    if (!isFile) throw new IntegrityError(`artifact ${digest} is not a regular file in the store`, { digest });
    const known = store.verified.get(digest);
    let lines: number;
    if (known?.key === key) {
      lines = known.lines;
    } else {
      const flights = store.verified.inFlight;
      const flightKey = `${digest}@${key}`;
      let flight = flights.get(flightKey);
      if (!flight) {
        flight = verifyPass(store, digest, handle, size).finally(() => flights.delete(flightKey));
        flights.set(flightKey, flight);
      }
      lines = await flight;
      // Remember only a file that did not change while it was hashed.
      if ((await fileKey(handle)).key === key) store.verified.remember(digest, { key, lines });
    }
    return { digest, handle, bytes: size, lines, close };
  } catch (err) {
    await close();
    throw toSluiceError(err, 'EDISK');
  }
}

/** An audit: hashes unconditionally, remembers an ok blob as verified; other failures throw EDISK. */
export async function checkBlob(
  store: Store,
  digest: string,
  open: () => Promise<BlobHandle> = () => store.backend.openBlobFile(digest),
): Promise<BlobCheck> {
  let blob: BlobHandle;
  try {
    blob = await open();
  } catch (err) {
    if (err instanceof NotFoundError) return { status: 'missing' };
    if (err instanceof IntegrityError) {
      const st = await lstatOrUndefined(store, store.layout.blobPath(digest));
      return { status: 'corrupt', actual: '', bytes: 0, ...(st ? { ino: st.ino } : {}) };
    }
    throw err;
  }
  try {
    const { key, isFile, ino } = await fileKey(blob);
    if (!isFile) return { status: 'corrupt', actual: '', bytes: 0, ino };
    const hash = createHash('sha256');
    const scanner = new LineScanner();
    const bytes = await readSequentially(blob, (chunk) => {
      hash.update(chunk);
      scanner.push(chunk);
      // Only the count matters here; entries would otherwise pile up.
      if (scanner.pendingEntries >= SPILL_ENTRIES) scanner.takeEntries();
    });
    const actual = hash.digest('hex');
    if (actual !== digest) return { status: 'corrupt', actual, bytes, ino };
    if ((await fileKey(blob)).key === key) store.verified.remember(digest, { key, lines: scanner.lines });
    return { status: 'ok', bytes, lines: scanner.lines };
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  } finally {
    await blob.close().catch(() => {});
  }
}

/** Later reads scan instead of retrying the rebuild; cleared when the blob is verified again. */
export function markIndexUnavailable(store: Store, digest: string): void {
  const v = store.verified.get(digest);
  if (v) v.indexUnavailable = true;
}

/** True when {@link markIndexUnavailable} was called since `digest` was last verified by `store`. */
export function isIndexUnavailable(store: Store, digest: string): boolean {
  return store.verified.get(digest)?.indexUnavailable === true;
}

/**
 * For a publisher's dedup: true (after `refresh`) when the stored blob is a
 * regular file of `bytes` bytes that matches its name, remembered as
 * verified. Anything else is false, and the publisher's copy over it heals
 * a corrupt blob. @throws EDISK for other filesystem errors.
 */
export async function refreshIntact(
  store: Store,
  digest: string,
  bytes: number,
  refresh: () => Promise<boolean>,
): Promise<boolean> {
  let blob: VerifiedBlob;
  try {
    blob = await verifyOpened(store, digest, await store.backend.openBlobFile(digest));
  } catch {
    // Missing, corrupt, unreadable (EIO): the publisher's own good copy goes in its place.
    return false;
  }
  try {
    if (blob.bytes !== bytes) return false;
    const before = (await fileKey(blob.handle)).key;
    if (!store.verified.holds(digest, before)) return false;
    if (!(await refresh())) return false;
    // The refresh changed the file's times, and with them its identity: re-key what was verified.
    // (A write landing between the check above and the refresh would not be seen; nothing but a
    // foreign writer to the store's own files can make one.)
    store.verified.remember(digest, { key: (await fileKey(blob.handle)).key, lines: blob.lines });
    return true;
  } catch {
    return false;
  } finally {
    await blob.close();
  }
}

/** Hashed while written; `fh` is the publisher's descriptor, so the identity is the file written. */
export async function rememberWritten(store: Store, digest: string, fh: StoreFile, lines: number): Promise<void> {
  try {
    store.verified.remember(digest, { key: (await fileKey(fileHandle(fh))).key, lines });
  } catch {
    // Only a cache: a read hashes it instead.
  }
}
