/**
 * The local mirror of an S3 session (docs/store.md, "Session records on
 * S3"): a file in the store's local directory that holds the session's
 * batch objects, in key order, as one event log, so the readers of local
 * logs (log-reader.ts) read S3 sessions unchanged.
 *
 * Before every read the mirror is brought up to date: one LIST of the keys
 * from the last mirrored one on, which also proves that the last mirrored
 * batch is still the object it was (same key, same ETag), then one GET per
 * new batch (per 4 MiB of it), appended in key order. A session that
 * changed under the mirror (deleted, or deleted and recorded again) is
 * mirrored again from its first batch into a new file; readers that hold
 * the old file keep reading what they opened.
 *
 * Each store instance writes only mirror files of its own, named with
 * {@link ownedName} (`sessions/<id>/<pid>-<token>.mirror`), and knows how
 * far each is complete from its own memory: several processes sharing the
 * local directory never write one file, so a crash mid-append or a stale
 * copy in another process can never change what this one reads. Files of
 * owners that died are removed when a session's mirror is started.
 */
import { constants, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import type { XXHashAPI } from 'xxhash-wasm';
import { OwnerCheck, ownedName, ownerPid } from '../../store/owners.js';
import type { ListedObject } from '../../store/s3/objects.js';
import type { Store } from '../../store/store.js';
import { DiskError, NotFoundError, toSluiceError } from '../protocol/errors.js';
import { loadHasher } from './frame.js';
import {
  batchKey,
  MAX_TRAILER_BYTES,
  MISSING_BATCHES_LINE,
  normalizeBatch,
  type S3Records,
  seqOfKey,
  sessionPrefix,
} from './s3-batch.js';
import { sessionDir } from './session-id.js';

/** Bytes per GET when copying a batch object into the mirror. */
const COPY_CHUNK = 4 * 1024 * 1024;
/** Suffix of mirror files. */
const MIRROR_SUFFIX = '.mirror';
/** Tries of a sync that found a batch gone between its listing and its GET (a delete in progress). */
const SYNC_ATTEMPTS = 3;

/** One session's mirror in one store instance. */
interface Mirror {
  path: string;
  /** Inode of the file once created (0 before): another file at the path means it was removed. */
  ino: bigint;
  /** Bytes of the file that are the mirrored batches (it may hold more: a cut-off copy). */
  end: number;
  /** The last batch mirrored. */
  last: { seq: number; etag: string } | undefined;
  modifiedAt: Date;
  /** Syncs of this mirror run one at a time. */
  queue: Promise<unknown>;
}

/** A mirror as of one sync: the file and how much of it is the log. */
export interface MirrorView {
  readonly path: string;
  readonly end: number;
  /** LastModified of the last batch. */
  readonly modifiedAt: Date;
}

const mirrors = new WeakMap<Store, Map<string, Mirror>>();

class Vanished extends Error {}

/**
 * Brings the mirror of session `id` up to date with the bucket and returns
 * it, or undefined when the session has no batch (it does not exist, or
 * was deleted).
 *
 * @throws DiskError (EDISK) when a listing or a batch cannot be read.
 */
export async function syncMirror(store: Store, s3: S3Records, id: string): Promise<MirrorView | undefined> {
  let byId = mirrors.get(store);
  if (!byId) {
    byId = new Map();
    mirrors.set(store, byId);
  }
  let m = byId.get(id);
  if (!m) {
    m = { path: '', ino: 0n, end: 0, last: undefined, modifiedAt: new Date(0), queue: Promise.resolve() };
    byId.set(id, m);
    const mirror = m;
    m.queue = removeDeadMirrors(store, id).then(() => {
      mirror.path = newMirrorPath(store, id);
    });
  }
  const mirror = m;
  const run = mirror.queue.then(() => syncWithRetries(store, s3, id, mirror));
  mirror.queue = run.catch(() => {});
  return run;
}

/** Forgets (and removes) this store instance's mirror of `id`: after a delete. */
export function dropMirror(store: Store, id: string): void {
  mirrors.get(store)?.delete(id);
}

async function syncWithRetries(store: Store, s3: S3Records, id: string, m: Mirror): Promise<MirrorView | undefined> {
  const h = await loadHasher();
  for (let attempt = 1; ; attempt++) {
    try {
      return await syncOnce(store, s3, id, m, h);
    } catch (err) {
      if (!(err instanceof Vanished)) throw toSluiceError(err, 'EDISK');
      if (attempt >= SYNC_ATTEMPTS) {
        throw new DiskError(`a batch of session ${JSON.stringify(id)} disappeared while it was read: ${err.message}`, {
          session: id,
        });
      }
      // Deleted under the sync: the next one starts from the session's first batch.
      await restart(store, id, m);
    }
  }
}

async function syncOnce(
  store: Store,
  s3: S3Records,
  id: string,
  m: Mirror,
  h: XXHashAPI,
): Promise<MirrorView | undefined> {
  if (m.ino !== 0n && !(await stillOurs(m))) await restart(store, id, m);
  const prefix = sessionPrefix(s3, id);
  const last = m.last;
  // From the key before the last mirrored one, so the listing starts with that one and proves it unchanged.
  const startAfter = last && last.seq > 0 ? batchKey(s3, id, last.seq - 1) : undefined;
  // Until the listing shows the last mirrored batch unchanged, nothing new can be trusted to follow it.
  let seen = last === undefined;
  let stale = false;
  let fh: fsp.FileHandle | undefined;
  try {
    for await (const o of s3.objects.list(prefix, startAfter)) {
      const seq = seqOfKey(prefix, o.key);
      if (seq === undefined) continue;
      if (!seen) {
        seen = true;
        if (last && seq === last.seq && o.etag === last.etag) continue;
        stale = true;
        break;
      }
      fh ??= await openForWrite(store, id, m);
      await appendBatch(s3, h, fh, m, o, seq);
    }
  } finally {
    await fh?.close();
  }
  if (!seen || stale) {
    // The last mirrored batch is gone or another object: the session changed under the mirror.
    await restart(store, id, m);
    return syncOnce(store, s3, id, m, h);
  }
  if (!m.last) return undefined;
  return { path: m.path, end: m.end, modifiedAt: m.modifiedAt };
}

/** Copies batch object `o` (number `seq`) to the end of the mirror. */
async function appendBatch(
  s3: S3Records,
  h: XXHashAPI,
  fh: fsp.FileHandle,
  m: Mirror,
  o: ListedObject,
  seq: number,
): Promise<void> {
  // Numbers are dense (s3-log-writer.ts): a gap is batches deleted behind sluice's back, and shows as a corrupt line.
  if (m.last && seq !== m.last.seq + 1) {
    await writeAt(fh, MISSING_BATCHES_LINE, m.end);
    m.end += MISSING_BATCHES_LINE.length;
  }
  let tail = Buffer.alloc(0);
  for (let at = 0; at < o.size; at += COPY_CHUNK) {
    let chunk: Buffer;
    try {
      chunk = await s3.objects.getRange(o.key, at, Math.min(o.size, at + COPY_CHUNK), o.etag);
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ENOTFOUND') throw new Vanished(o.key);
      throw err;
    }
    if (chunk.length !== Math.min(COPY_CHUNK, o.size - at)) {
      throw new DiskError(`S3 GET of ${o.key} returned ${chunk.length} bytes at ${at} of ${o.size}`, { key: o.key });
    }
    await writeAt(fh, chunk, m.end + at);
    tail = Buffer.concat([tail, chunk]);
    if (tail.length > MAX_TRAILER_BYTES) tail = tail.subarray(tail.length - MAX_TRAILER_BYTES);
  }
  const { keep, extra } = normalizeBatch(h, o.size, tail);
  if (extra.length > 0) await writeAt(fh, extra, m.end + keep);
  m.end += keep + extra.length;
  m.last = { seq, etag: o.etag };
  if (o.lastModified) m.modifiedAt = o.lastModified;
}

async function writeAt(fh: fsp.FileHandle, buf: Buffer, position: number): Promise<void> {
  for (let done = 0; done < buf.length; ) {
    const { bytesWritten } = await fh.write(buf, done, buf.length - done, position + done);
    done += bytesWritten;
  }
}

/** Opens the mirror file for writing, creating it (and the session's local directory) the first time. */
async function openForWrite(store: Store, id: string, m: Mirror): Promise<fsp.FileHandle> {
  if (m.ino !== 0n) return fsp.open(m.path, constants.O_WRONLY | constants.O_NONBLOCK);
  await fsp.mkdir(sessionDir(store.layout, id), { recursive: true, mode: 0o700 });
  const fh = await fsp.open(
    m.path,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NONBLOCK,
    0o600,
  );
  m.ino = (await fh.stat({ bigint: true })).ino;
  return fh;
}

/** True when the mirror's file is still the one this instance wrote (a local delete removes it). */
async function stillOurs(m: Mirror): Promise<boolean> {
  try {
    const st = await fsp.stat(m.path, { bigint: true });
    return st.ino === m.ino && st.size >= BigInt(m.end);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return false;
    throw err;
  }
}

/** Starts the mirror again from nothing, in a new file (readers of the old one keep it open). */
async function restart(store: Store, id: string, m: Mirror): Promise<void> {
  const old = m.ino !== 0n ? m.path : undefined;
  m.path = newMirrorPath(store, id);
  m.ino = 0n;
  m.end = 0;
  m.last = undefined;
  m.modifiedAt = new Date(0);
  if (old) await fsp.unlink(old).catch(() => {});
}

function newMirrorPath(store: Store, id: string): string {
  return join(sessionDir(store.layout, id), `${ownedName()}${MIRROR_SUFFIX}`);
}

/** Removes the mirror files of session `id` whose owners died (best effort: they are caches). */
async function removeDeadMirrors(store: Store, id: string): Promise<void> {
  const dir = sessionDir(store.layout, id);
  let names: string[];
  try {
    names = await fsp.readdir(dir);
  } catch {
    return;
  }
  const owners = new OwnerCheck();
  for (const name of names) {
    if (!name.endsWith(MIRROR_SUFFIX)) continue;
    const pid = ownerPid(name);
    if (pid === undefined) continue;
    const st = await fsp.stat(join(dir, name)).catch(() => undefined);
    if (st && !owners.alive(pid, st.mtimeMs, name)) await fsp.unlink(join(dir, name)).catch(() => {});
  }
}

/** A session with no batch, as the readers report it. */
export function noSuchSession(id: string): NotFoundError {
  return new NotFoundError(`no session ${JSON.stringify(id)} in the store`, { session: id });
}
