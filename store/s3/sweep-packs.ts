/**
 * Deleting the pack objects of an S3 store while other hosts publish. A pack
 * is deleted whole, and only when nothing in it is referenced: no entry
 * marked, no lease covering it, not young. No publisher ever relies on a
 * packed copy it did not upload itself under its lease (store/s3/packs.ts),
 * so packs need no tombstones; before deleting, the collection still
 * re-reads the leases, the roots added since its scan and the packs added
 * since its listing (with the manifests among them), and keeps any pack they
 * name, then deletes in batches, each after renewing the GC lock.
 */
import { IntegrityError } from '../../engine/protocol/errors.js';
import { manifestStreams } from '../gc/blobs.js';
import type { RootScan } from '../gc/roots.js';
import type { GcStep } from '../gc/sweep.js';
import { MAX_MANIFEST_BYTES } from '../manifest.js';
import type { Store } from '../store.js';
import type { S3Backend } from './backend.js';
import type { S3GcLock } from './gc-lock.js';
import { type LeaseScan, leasedPack, scanLeases } from './lease-scan.js';
import type { ListedPack } from './packs.js';

/** Packs deleted per lock renewal. */
const DELETE_BATCH = 64;

/** True when a lease of `leases` covers `pack`. */
export function packLeased(leases: LeaseScan, pack: ListedPack): boolean {
  return leasedPack(leases, pack.owner, pack.seq);
}

/**
 * Throws EINTEGRITY when a pack of `packs` has an unreadable index. What
 * such a pack holds is unknown, manifests included, and the streams of a
 * manifest in it may be anywhere in the store: nothing can be proven
 * unreferenced, so a collection fails closed, before its first delete.
 */
export function assertPacksIndexed(packs: readonly ListedPack[]): void {
  const bad = packs.filter((p) => !p.indexed);
  if (bad.length === 0) return;
  const first = bad[0] as ListedPack;
  throw new IntegrityError(
    `S3 pack ${first.key}${bad.length > 1 ? ` (and ${bad.length - 1} more)` : ''} has an unreadable index (${first.unreadable ?? 'unknown'}): the collection deleted nothing, since a manifest in it may reference any blob; \`sluice verify\` lists such packs`,
    { keys: bad.map((p) => p.key), reasons: bad.map((p) => p.unreadable ?? 'unknown') },
  );
}

/** Deletes the packs of `dead` that the re-check does not keep; what it removed. */
export async function sweepS3Packs(
  store: Store,
  backend: S3Backend,
  lock: S3GcLock,
  dead: readonly ListedPack[],
  listed: readonly ListedPack[],
  opts: { roots: RootScan; step: (s: GcStep) => Promise<void> },
): Promise<{ packsRemoved: number; removed: number; bytesFreed: number }> {
  const out = { packsRemoved: 0, removed: 0, bytesFreed: 0 };
  if (dead.length === 0) return out;
  const { objects, keyBase: base } = backend;
  await opts.step('recheck');
  await lock.renew();
  const leases = await scanLeases(objects, base, 'keep');
  const keep = new Set(leases.digests);
  for (const d of await opts.roots.appended()) keep.add(d);
  await opts.step('relisted');
  const before = new Set(listed.map((p) => `${p.key} ${p.etag}`));
  const sizes = new Map<string, number>();
  const relisted = await backend.packObjects.list();
  assertPacksIndexed(relisted);
  for (const p of relisted) {
    for (const e of p.entries) sizes.set(e.digest, e.length);
    // Uploaded since the listing: young again, and so is what its manifests name.
    if (!before.has(`${p.key} ${p.etag}`)) for (const e of p.entries) keep.add(e.digest);
  }
  const visit = [...keep];
  while (visit.length > 0) {
    const d = visit.pop() as string;
    if ((sizes.get(d) ?? Number.POSITIVE_INFINITY) > MAX_MANIFEST_BYTES) continue;
    for (const s of await manifestStreams(store, d)) {
      if (keep.has(s)) continue;
      keep.add(s);
      visit.push(s);
    }
  }
  const doomed = dead.filter((p) => !packLeased(leases, p) && !p.entries.some((e) => keep.has(e.digest)));
  for (let at = 0; at < doomed.length; at += DELETE_BATCH) {
    const batch = doomed.slice(at, at + DELETE_BATCH);
    await opts.step('unlink');
    // Still ours, or stop before deleting anything more (store/s3/gc-lock.ts).
    await lock.renew();
    for (const p of batch) {
      await objects.delete(p.key);
      backend.packObjects.forgetPack(p.key);
      out.packsRemoved++;
      out.removed += p.entries.length;
      out.bytesFreed += p.size;
    }
  }
  return out;
}
