/**
 * The local mirror of an S3 session: its batches in one local file, so the
 * readers of local logs read S3 sessions unchanged (docs/store.md, "Mirrors").
 * Each store instance writes only mirrors of its own.
 */
import { constants, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import type { XXHashAPI } from 'xxhash-wasm';
import { ownedName } from '../../store/owners.js';
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
import { adoptDeadMirror, MIRROR_SUFFIX, type Mirror, STATE_SUFFIX, writeState } from './s3-mirror-files.js';
import { sessionDir } from './session-id.js';

/** Bytes per GET when copying a batch object into the mirror. */
const COPY_CHUNK = 4 * 1024 * 1024;
/** Tries of a sync that found a batch gone between its listing and its GET (a delete in progress). */
const SYNC_ATTEMPTS = 3;

/** A mirror as of one sync: the file and how much of it is the log. */
export interface MirrorView {
  readonly path: string;
  readonly end: number;
  readonly modifiedAt: Date;
}

const mirrors = new WeakMap<Store, Map<string, Mirror>>();

class Vanished extends Error {}

/** Brings the mirror of session `id` up to date and returns it; undefined when the session has no batch. EDISK when a listing or batch cannot be read. */
export async function syncMirror(store: Store, s3: S3Records, id: string): Promise<MirrorView | undefined> {
  let byId = mirrors.get(store);
  if (!byId) {
    byId = new Map();
    mirrors.set(store, byId);
  }
  let m = byId.get(id);
  if (!m) {
    const stem = newStem(store, id);
    m = {
      stem,
      path: `${stem}${MIRROR_SUFFIX}`,
      ino: 0n,
      end: 0,
      last: undefined,
      modifiedAt: new Date(0),
      queue: Promise.resolve(),
    };
    byId.set(id, m);
    const mirror = m;
    m.queue = adoptDeadMirror(store, id, mirror).catch(() => {});
  }
  const mirror = m;
  const run = mirror.queue.then(() => syncWithRetries(store, s3, id, mirror));
  mirror.queue = run.catch(() => {});
  return run;
}

/** Forgets this store instance's mirror of `id` (after a delete, which removes the files). */
export function dropMirror(store: Store, id: string): void {
  mirrors.get(store)?.delete(id);
}

async function syncWithRetries(store: Store, s3: S3Records, id: string, m: Mirror): Promise<MirrorView | undefined> {
  const h = await loadHasher();
  for (let attempt = 1; ; attempt++) {
    try {
      return await syncOnce(store, s3, id, m, h);
    } catch (err) {
      if (!(err instanceof Vanished)) {
        const e = toSluiceError(err, 'EDISK');
        // A reader takes ENOTFOUND for "no such session": a bucket gone is a failure to read it.
        throw e.code === 'ENOTFOUND' ? new DiskError(e.message, e.details) : e;
      }
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
    // What the state will say is complete must be on disk before it says so.
    if (fh) await fh.datasync();
  } finally {
    await fh?.close();
  }
  if (fh) await writeState(m);
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
  // Numbers are dense from 0 (s3-log-writer.ts): a gap is batches lost and shows as a corrupt line.
  // Nothing counts as mirrored until the whole batch is written: a failure leaves no trace.
  let start = m.end;
  if (seq !== (m.last ? m.last.seq + 1 : 0)) {
    await writeAt(fh, MISSING_BATCHES_LINE, start);
    start += MISSING_BATCHES_LINE.length;
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
    await writeAt(fh, chunk, start + at);
    tail = Buffer.concat([tail, chunk]);
    if (tail.length > MAX_TRAILER_BYTES) tail = tail.subarray(tail.length - MAX_TRAILER_BYTES);
  }
  const { keep, extra } = normalizeBatch(h, o.size, tail);
  if (extra.length > 0) await writeAt(fh, extra, start + keep);
  m.end = start + keep + extra.length;
  m.last = { seq, etag: o.etag };
  if (o.lastModified) m.modifiedAt = o.lastModified;
}

async function writeAt(fh: fsp.FileHandle, buf: Buffer, position: number): Promise<void> {
  for (let done = 0; done < buf.length; ) {
    const { bytesWritten } = await fh.write(buf, done, buf.length - done, position + done);
    done += bytesWritten;
  }
}

/**
 * Opens the mirror file for writing, creating it the first time. Later opens
 * never follow a link and check that the file is still the one this instance
 * wrote; anything else at the path is never written, the mirror starts over.
 */
async function openForWrite(store: Store, id: string, m: Mirror): Promise<fsp.FileHandle> {
  if (m.ino !== 0n) {
    let fh: fsp.FileHandle;
    try {
      fh = await fsp.open(m.path, constants.O_WRONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === 'ENOENT' || code === 'ELOOP' || code === 'ENXIO') throw new Vanished(m.path);
      throw err;
    }
    const st = await fh.stat({ bigint: true }).catch(async (err: unknown) => {
      await fh.close();
      throw err;
    });
    if (st.isFile() && st.ino === m.ino) return fh;
    await fh.close();
    throw new Vanished(m.path);
  }
  await fsp.mkdir(sessionDir(store.layout, id), { recursive: true, mode: 0o700 });
  const fh = await fsp.open(
    m.path,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NONBLOCK | constants.O_NOFOLLOW,
    0o600,
  );
  m.ino = (await fh.stat({ bigint: true })).ino;
  return fh;
}

/** True when the mirror's file is still the one this instance wrote (a local delete removes it). */
async function stillOurs(m: Mirror): Promise<boolean> {
  try {
    // lstat: a link at the path is not our file, even when it names it.
    const st = await fsp.lstat(m.path, { bigint: true });
    return st.isFile() && st.ino === m.ino && st.size >= BigInt(m.end);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return false;
    throw err;
  }
}

/** Starts the mirror again from nothing, in a new file (readers of the old one keep it open). */
async function restart(store: Store, id: string, m: Mirror): Promise<void> {
  const old = m.ino !== 0n ? m.stem : undefined;
  m.stem = newStem(store, id);
  m.path = `${m.stem}${MIRROR_SUFFIX}`;
  m.ino = 0n;
  m.end = 0;
  m.last = undefined;
  m.modifiedAt = new Date(0);
  if (old) {
    await fsp.unlink(`${old}${STATE_SUFFIX}`).catch(() => {});
    await fsp.unlink(`${old}${MIRROR_SUFFIX}`).catch(() => {});
  }
}

function newStem(store: Store, id: string): string {
  return join(sessionDir(store.layout, id), ownedName());
}

/** A session with no batch, as the readers report it. */
export function noSuchSession(id: string): NotFoundError {
  return new NotFoundError(`no session ${JSON.stringify(id)} in the store`, { session: id });
}
