/**
 * Deleting an S3 store's blobs while other hosts publish: (1) a create-once
 * tombstone per candidate; (2) THEN re-read the leases, the roots added
 * since the scan and the manifests placed since the listing, keeping what
 * they name (transitively) and anything replaced since or in the grace
 * period; (3) delete the rest in batches, each after renewing the GC lock,
 * so a collector taken over stops. Kept candidates lose their tombstone.
 * Why this loses nothing: docs/operations.md, "GC across hosts".
 */
import { toSluiceError } from '../../engine/protocol/errors.js';
import { manifestStreams } from '../gc/blobs.js';
import type { RootScan } from '../gc/roots.js';
import { emptySweep, type GcStep, type SweepResult } from '../gc/sweep.js';
import { INDEX_MIN_BLOB_BYTES } from '../line-index.js';
import { MAX_MANIFEST_BYTES } from '../manifest.js';
import type { Store } from '../store.js';
import type { S3Backend } from './backend.js';
import { youngOnServer } from './expiry.js';
import type { S3GcLock } from './gc-lock.js';
import { scanLeases } from './lease-scan.js';
import { tombstoneKey } from './tombstones.js';

/** An S3 blob as a listing saw it. */
export interface ListedObjectBlob {
  bytes: number;
  /** Server clock; undefined counts as young. */
  lastModified: Date | undefined;
  etag: string;
}

/** Blobs deleted per lock renewal. */
const DELETE_BATCH = 64;
/** Requests in flight at once while tombstoning or deleting. */
const PARALLEL = 8;

const BLOB_KEY = /blobs\/sha256\/([0-9a-f]{2})\/([0-9a-f]{62})$/;

/** Every blob of the S3 store, by digest (other keys under blobs/ are left alone). */
export async function listS3Blobs(backend: S3Backend): Promise<Map<string, ListedObjectBlob>> {
  const out = new Map<string, ListedObjectBlob>();
  const prefix = `${backend.keyBase}blobs/sha256/`;
  for await (const o of backend.objects.list(prefix)) {
    const m = BLOB_KEY.exec(o.key);
    if (!m || o.key !== backend.blobKey(`${m[1]}${m[2]}`)) continue;
    out.set(`${m[1]}${m[2]}`, { bytes: o.size, lastModified: o.lastModified, etag: o.etag });
  }
  return out;
}

/** Runs `fn` over `items`, {@link PARALLEL} at a time. */
async function each<T>(items: readonly T[], fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, items.length) }, worker));
}

/** Tombstones `candidates`, re-checks them, deletes the rest (see the module comment). */
export async function sweepS3(
  store: Store,
  backend: S3Backend,
  lock: S3GcLock,
  candidates: readonly string[],
  listed: ReadonlyMap<string, ListedObjectBlob>,
  opts: { graceMs: number; roots: RootScan; step: (s: GcStep) => Promise<void> },
): Promise<SweepResult> {
  const result = emptySweep();
  if (candidates.length === 0) return result;
  const { objects, keyBase: base } = backend;
  const stone = Buffer.from(`${lock.id}\n`, 'latin1');
  /** Candidates with a tombstone still standing. */
  const stoned = new Set<string>();
  try {
    for (const d of candidates) {
      await opts.step('tombstone');
      // Create-once: a tombstone already there is a stalled collection's, written after this one cleared
      // the stale ones; its digest is kept this time (a publisher may have taken that one for stale).
      if ((await objects.putIfAbsent(tombstoneKey(base, d), stone)) !== undefined) stoned.add(d);
    }
    await opts.step('recheck');
    await lock.renew();
    const keep = (await scanLeases(objects, base, 'keep')).digests;
    for (const d of await opts.roots.appended()) keep.add(d);
    await opts.step('relisted');
    const now = await listS3Blobs(backend);
    const serverNow = objects.serverDate;
    for (const [d, b] of now) {
      const before = listed.get(d);
      if (before && before.etag === b.etag) continue;
      // Placed (or replaced) since the listing: young again, and what it references if it is a manifest.
      keep.add(d);
      if (b.bytes <= MAX_MANIFEST_BYTES) for (const s of await manifestStreams(store, d)) keep.add(s);
    }
    if (opts.graceMs > 0) {
      for (const d of candidates) {
        if (youngOnServer(now.get(d)?.lastModified, serverNow, opts.graceMs)) keep.add(d);
      }
    }
    const restore = new Set<string>();
    const back = [...keep].filter((d) => stoned.has(d));
    while (back.length > 0) {
      const d = back.pop() as string;
      if (restore.has(d)) continue;
      restore.add(d);
      if ((listed.get(d)?.bytes ?? 0) <= MAX_MANIFEST_BYTES) {
        for (const s of await manifestStreams(store, d)) if (stoned.has(s) && !restore.has(s)) back.push(s);
      }
    }
    const doomed = candidates.filter((d) => stoned.has(d) && !restore.has(d) && now.has(d));
    for (let at = 0; at < doomed.length; at += DELETE_BATCH) {
      const batch = doomed.slice(at, at + DELETE_BATCH);
      await opts.step('unlink');
      // Still ours, or stop before deleting anything more (store/s3/gc-lock.ts).
      await lock.renew();
      await each(batch, async (d) => {
        const size = listed.get(d)?.bytes ?? 0;
        await objects.delete(backend.blobKey(d));
        if (size >= INDEX_MIN_BLOB_BYTES) {
          await objects.delete(backend.indexKey(d));
          await store.io.unlink(store.layout.indexPath(d)).catch(() => {});
          result.indexRemoved++;
        }
        await objects.delete(tombstoneKey(base, d));
        stoned.delete(d);
        result.removed++;
        result.bytesFreed += size;
      });
    }
    // Kept (or gone meanwhile): the tombstone goes, the blob was never moved.
    await each([...stoned], async (d) => {
      await objects.delete(tombstoneKey(base, d));
      stoned.delete(d);
      if (restore.has(d)) result.restored++;
    });
  } catch (err) {
    // Whatever is still tombstoned stands again: the blobs were never moved, only marked. Not after
    // the lock was taken over: a tombstone of this name may be the new collection's by now, and the
    // new one (or the next) clears these.
    if ((err as { details?: { s3?: unknown } }).details?.s3 !== 'LockLost') {
      await each([...stoned], (d) => objects.delete(tombstoneKey(base, d)).catch(() => {}));
    }
    throw toSluiceError(err, 'EDISK');
  }
  return result;
}
