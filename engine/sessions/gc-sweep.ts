/**
 * Deleting blobs safely while publishers run: tombstoning.
 *
 * A candidate is first renamed into this collection's trash directory
 * (`gc/trash/<pid>-<random>/<digest>`, inside the store, so the rename is
 * atomic). Then the pins are read again, and a tombstoned blob is put back
 * when a live pin now holds it, or when its mtime differs from the one the
 * listing saw (a publisher deduplicated it and refreshed the mtime, then may
 * have made it a root and released its pin before this re-check), or when it
 * is inside the grace period. Only then is it unlinked, with its index file.
 *
 * A publisher that deduplicates against a blob in the trash finds it gone
 * (Store.refreshBlob's utimes fails with ENOENT) and places its own copy;
 * putting the tombstone back over that copy is harmless, the content is the
 * same. Trash left by a collection that died is restored by the next one.
 */
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { INDEX_MIN_BLOB_BYTES } from '../../store/line-index.js';
import type { Store } from '../../store/store.js';
import { toSluiceError } from '../protocol/errors.js';
import { OwnerCheck, ownerPid } from './owners.js';
import { readdirOrEmpty, scanPins } from './roots.js';

/** A listed blob: size and mtime as the listing saw them. */
export interface ListedBlob {
  bytes: number;
  mtimeMs: number;
  mtimeNs: bigint;
}

/** Named points of a collection, for tests that interleave it with publishers. */
export type GcStep = 'listed' | 'pins' | 'roots' | 'marked' | 'tombstone' | 'recheck' | 'unlink';

/** What a sweep did. */
export interface SweepResult {
  removed: number;
  bytesFreed: number;
  restored: number;
  indexRemoved: number;
}

const isMissing = (err: unknown) => (err as { code?: unknown }).code === 'ENOENT';

/** Tombstones, re-checks and deletes `candidates`, `batch` at a time. */
export async function sweep(
  store: Store,
  candidates: readonly string[],
  listed: ReadonlyMap<string, ListedBlob>,
  opts: { graceMs: number; batch: number; step: (s: GcStep) => Promise<void> },
): Promise<SweepResult> {
  const result: SweepResult = { removed: 0, bytesFreed: 0, restored: 0, indexRemoved: 0 };
  if (candidates.length === 0) return result;
  const trash = join(store.layout.trash, `${process.pid}-${randomBytes(6).toString('hex')}`);
  await fsp.mkdir(trash, { recursive: true, mode: 0o700 });
  const moved: string[] = [];
  try {
    for (let i = 0; i < candidates.length; i += opts.batch) {
      for (const d of candidates.slice(i, i + opts.batch)) {
        await opts.step('tombstone');
        try {
          await store.io.rename(store.layout.blobPath(d), join(trash, d));
          moved.push(d);
        } catch (err) {
          if (!isMissing(err)) throw err;
        }
      }
      await opts.step('recheck');
      // A fresh owner check: a pid found dead earlier may belong to a new publisher by now.
      const pins = await scanPins(store, new OwnerCheck());
      const now = Date.now();
      while (moved.length > 0) {
        const d = moved.shift() as string;
        const path = join(trash, d);
        const st = await fsp.stat(path, { bigint: true });
        const seen = listed.get(d);
        const refreshed = seen === undefined || st.mtimeNs !== seen.mtimeNs;
        if (pins.digests.has(d) || refreshed || now - Number(st.mtimeMs) < opts.graceMs) {
          await store.io.rename(path, store.layout.blobPath(d));
          result.restored++;
          continue;
        }
        await opts.step('unlink');
        await store.io.unlink(path);
        result.removed++;
        result.bytesFreed += Number(st.size);
        // Only large blobs get an index; a stray one of a small blob is left to the orphan-index pass.
        if (Number(st.size) >= INDEX_MIN_BLOB_BYTES && (await removeIndexOfAbsentBlob(store, d))) result.indexRemoved++;
      }
    }
  } catch (err) {
    // Whatever is still tombstoned goes back: a failed collection must not lose a blob.
    for (const d of moved) await restore(store, join(trash, d), d).catch(() => {});
    throw toSluiceError(err, 'EDISK');
  } finally {
    await fsp.rmdir(trash).catch(() => {});
  }
  return result;
}

/** Removes the line index of `digest` unless its blob is present (again). True when one was removed. */
export async function removeIndexOfAbsentBlob(store: Store, digest: string): Promise<boolean> {
  if (await store.hasBlob(digest)) return false;
  try {
    await store.io.unlink(store.layout.indexPath(digest));
    return true;
  } catch {
    return false;
  }
}

async function restore(store: Store, path: string, digest: string): Promise<void> {
  if (await store.hasBlob(digest)) await store.io.unlink(path);
  else await store.io.rename(path, store.layout.blobPath(digest));
}

/**
 * Restores the trash of collections that died mid-sweep (their owner is
 * dead, or is this process and the caller holds the lock): each tombstone
 * goes back to its address unless the blob is there again. Returns how many
 * tombstones were handled.
 */
export async function recoverTrash(store: Store): Promise<number> {
  const base = store.layout.trash;
  const owners = new OwnerCheck();
  let recovered = 0;
  for (const name of await readdirOrEmpty(base)) {
    const dir = join(base, name);
    const st = await fsp.stat(dir).catch(() => undefined);
    if (!st?.isDirectory()) continue;
    const pid = ownerPid(`${name}.trash`);
    if (pid === undefined || (pid !== process.pid && owners.alive(pid, st.mtimeMs))) continue;
    for (const entry of await readdirOrEmpty(dir)) {
      if (!/^[0-9a-f]{64}$/.test(entry)) continue;
      await restore(store, join(dir, entry), entry);
      recovered++;
    }
    await fsp.rmdir(dir).catch(() => {});
  }
  return recovered;
}
