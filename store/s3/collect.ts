/**
 * Garbage collection of an S3 store across hosts (docs/operations.md, "GC
 * across hosts"): store/gc/collect.ts's order with S3's parts. Under the
 * lock object, standing tombstones (a dead collection's) are cleared; list
 * FIRST, THEN the leases (expired ones reclaimed), THEN the roots; mark by
 * the server's clock; sweep (store/s3/sweep.ts). Anything unreadable fails
 * the collection (EDISK) before a delete, a pack's index too (EINTEGRITY:
 * what the pack holds might reference anything).
 */
import { toSluiceError } from '../../engine/protocol/errors.js';
import { manifestStreams } from '../gc/blobs.js';
import {
  type CollectHooks,
  emptyReport,
  type GcOptions,
  type GcReport,
  graceOf,
  markReachable,
  reclaimTemporaries,
} from '../gc/collect.js';
import type { RootScan } from '../gc/roots.js';
import type { GcStep } from '../gc/sweep.js';
import { MAX_MANIFEST_BYTES } from '../manifest.js';
import { OwnerCheck } from '../owners.js';
import type { Store } from '../store.js';
import type { S3Backend } from './backend.js';
import { youngOnServer } from './expiry.js';
import { DEFAULT_GC_LOCK_TTL_MS, S3GcLock } from './gc-lock.js';
import { scanLeases } from './lease-scan.js';
import { listS3Blobs, sweepS3 } from './sweep.js';
import { assertPacksIndexed, packLeased, sweepS3Packs } from './sweep-packs.js';
import { tombstonePrefix } from './tombstones.js';

const INDEX_KEY = /index\/sha256\/([0-9a-f]{2})\/([0-9a-f]{62})\.idx$/;

/**
 * Safe against publishers on any host, even with a grace period of 0, under
 * the one assumption docs/operations.md states.
 * @throws EBADOPTION; ETIMEOUT when another holds the lock or took it over; EDISK.
 */
export async function collectS3Store(
  store: Store,
  backend: S3Backend,
  hooks: CollectHooks,
  options: GcOptions = {},
): Promise<GcReport> {
  const started = Date.now();
  const graceMs = graceOf(options);
  const dryRun = options.dryRun === true;
  const step = async (s: GcStep) => {
    await options.onStep?.(s);
  };
  const { objects, keyBase: base } = backend;
  const lock = dryRun
    ? undefined
    : await S3GcLock.acquire(
        objects,
        base,
        options.lockTtlMs ?? DEFAULT_GC_LOCK_TTL_MS,
        options.lockTimeoutMs ?? 30_000,
      );
  let roots: RootScan | undefined;
  try {
    const report = emptyReport(dryRun, graceMs);
    if (lock) {
      // Under the lock, every tombstone is a dead (or fenced) collection's: its blob was never moved.
      for await (const o of objects.list(tombstonePrefix(base))) {
        await objects.delete(o.key);
        report.trashRecovered++;
      }
      await hooks.whileLocked?.();
    }
    // The order below is the safety argument: blobs first, then leases, then roots.
    const listed = await listS3Blobs(backend);
    const packs = await backend.packObjects.list();
    assertPacksIndexed(packs);
    report.packs = packs.length;
    const packed = new Map<string, number>();
    for (const p of packs) for (const e of p.entries) packed.set(e.digest, e.length);
    report.scanned = listed.size + packed.size;
    await step('listed');
    const leases = await scanLeases(objects, base, dryRun ? 'skip' : 'reclaim');
    report.pinned = leases.digests.size;
    report.pinsReclaimed = leases.reclaimed;
    await step('pins');
    roots = await hooks.roots(store);
    report.roots = roots.digests.size;
    await step('roots');

    const serverNow = objects.serverDate;
    const young = [...listed].filter(([, b]) => youngOnServer(b.lastModified, serverNow, graceMs)).map(([d]) => d);
    // A pack's age is its blobs' age; a pack a lease covers pins everything in it.
    const held = packs.filter((p) => youngOnServer(p.lastModified, serverNow, graceMs) || packLeased(leases, p));
    const heldDigests = held.flatMap((p) => p.entries.map((e) => e.digest));
    report.young = young.length + heldDigests.length;
    const marked = await markReachable([roots.digests, leases.digests, young, heldDigests], async (d) => {
      const bytes = listed.get(d)?.bytes ?? packed.get(d);
      return bytes !== undefined && bytes <= MAX_MANIFEST_BYTES ? manifestStreams(store, d) : [];
    });
    await step('marked');
    const heldKeys = new Set(held.map((p) => p.key));
    const deadPacks = packs.filter(
      (p) => p.indexed && !heldKeys.has(p.key) && !p.entries.some((e) => marked.has(e.digest)),
    );

    const candidates = [...listed.keys()].filter((d) => !marked.has(d)).sort();
    if (!lock) {
      report.removed = candidates.length;
      for (const d of candidates) report.bytesFreed += listed.get(d)?.bytes ?? 0;
      report.packsRemoved = deadPacks.length;
      for (const p of deadPacks) {
        report.removed += p.entries.length;
        report.bytesFreed += p.size;
      }
    } else {
      const swept = await sweepS3(store, backend, lock, candidates, listed, { graceMs, roots, step });
      report.removed = swept.removed;
      report.bytesFreed = swept.bytesFreed;
      report.restored = swept.restored;
      report.indexRemoved = swept.indexRemoved;
      report.indexRemoved += await removeOrphanIndexObjects(backend, graceMs);
      const sweptPacks = await sweepS3Packs(store, backend, lock, deadPacks, packs, { roots, step });
      report.packsRemoved = sweptPacks.packsRemoved;
      report.removed += sweptPacks.removed;
      report.bytesFreed += sweptPacks.bytesFreed;
    }
    report.kept = Math.max(0, report.scanned - report.removed);
    const tmp = await reclaimTemporaries(store, new OwnerCheck(), dryRun);
    report.tmpReclaimed = tmp.files;
    report.tmpBytesReclaimed = tmp.bytes;
    report.durationMs = Date.now() - started;
    return report;
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  } finally {
    await roots?.close();
    await lock?.release();
  }
}

// An index is placed after its blob, so one whose blob is gone is an orphan (at worst a cache rebuilt).
async function removeOrphanIndexObjects(backend: S3Backend, graceMs: number): Promise<number> {
  const { objects } = backend;
  let removed = 0;
  for await (const o of objects.list(`${backend.keyBase}index/sha256/`)) {
    const m = INDEX_KEY.exec(o.key);
    if (!m) continue;
    const now = objects.serverDate;
    if (youngOnServer(o.lastModified, now, graceMs)) continue;
    if (await backend.hasBlob(`${m[1]}${m[2]}`)) continue;
    await objects.delete(o.key);
    removed++;
  }
  return removed;
}
