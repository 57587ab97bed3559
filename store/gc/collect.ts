/**
 * Garbage collection of a directory store under the GC lock
 * (docs/operations.md): restore a dead collection's trash; list every blob
 * FIRST, THEN read the pins, THEN the roots. A publisher pins before placing
 * and releases once its record is durable, so every listed blob is pinned or
 * referenced by a record read after the listing. No step rests on a
 * timestamp; anything unreadable fails with EDISK before any delete.
 */
import { join } from 'node:path';
import { BadOptionError, toSluiceError } from '../../engine/protocol/errors.js';
import type { DirectoryPacks } from '../directory/packs.js';
import { MAX_MANIFEST_BYTES } from '../manifest.js';
import { readdirOrEmpty } from '../owned-files.js';
import { OwnerCheck, ownerPid } from '../owners.js';
import { listPacks } from '../pack-index.js';
import type { Store } from '../store.js';
import { insideGrace, type ListedBlob, listBlobs, manifestStreams, packedManifestStreams } from './blobs.js';
import { acquireGcLock } from './lock.js';
import { scanPins } from './pin-scan.js';
import { mayRepack, orphanPackIndexes } from './repack.js';
import type { RootScan, RootSource } from './roots.js';
import { type GcStep, recoverTrash, removeIndexOfAbsentBlob, sweep } from './sweep.js';

export type { RootScan, RootSource } from './roots.js';
export type { GcStep } from './sweep.js';

/** Default grace period: one hour. */
export const DEFAULT_GC_GRACE_MS = 60 * 60 * 1000;

/** Options of {@link collectGarbage}. */
export interface GcOptions {
  /** Blobs modified less than this long ago survive, with everything a young manifest references. @default 3600000 (1 hour) */
  graceMs?: number;
  /** Report what would be removed; change nothing (and take no lock). @default false */
  dryRun?: boolean;
  /** How long to wait for another collection's lock before failing with ETIMEOUT. @default 30000 */
  lockTimeoutMs?: number;
  /** S3: the GC lock's TTL by the server's clock, renewed before every batch of deletes. @default 120000 */
  lockTtlMs?: number;
  /** @internal Awaited at each named step; tests interleave publishers there. */
  onStep?: (step: GcStep) => Promise<void> | void;
}

/** What the store's owner adds to a collection (engine/sessions/gc.ts supplies the sessions). */
export interface CollectHooks {
  /** The roots: read after the listing and the pins, re-read at the sweep's re-check. */
  roots: RootSource;
  /** Runs under the GC lock before the listing (not in a dry run): the owner's own reclaiming. */
  whileLocked?: () => Promise<void>;
}

/** What a collection found and did (with `dryRun`: would do). */
export interface GcReport {
  dryRun: boolean;
  graceMs: number;
  /** Blobs listed. */
  scanned: number;
  /** Blobs kept (scanned minus removed). */
  kept: number;
  /** Blobs removed. */
  removed: number;
  /** Bytes of the removed blobs. */
  bytesFreed: number;
  /** Digests the roots reference (in sluice: live calls of existing sessions). */
  roots: number;
  /** Digests held by pins of live owners. */
  pinned: number;
  /** Blobs inside the grace period. */
  young: number;
  /** Candidates put back because a publisher pinned, recorded or referenced them during the sweep. */
  restored: number;
  /** Temporary files of dead owners removed. */
  tmpReclaimed: number;
  /** Their bytes. */
  tmpBytesReclaimed: number;
  /** Pin files of dead owners removed. */
  pinsReclaimed: number;
  /** Line-index files removed with their blob, or orphaned. */
  indexRemoved: number;
  /** Tombstones of a dead collection restored. */
  trashRecovered: number;
  /** Packs listed (their blobs are counted in `scanned`). */
  packs: number;
  /** Packs rewritten or dropped: their live blobs copied into a new pack, then the pack removed. */
  packsRemoved: number;
  /** Live packed blobs copied into the collection's new pack. */
  packedCopied: number;
  durationMs: number;
}

const PREFIX = /^[0-9a-f]{2}$/;
const INDEX_NAME = /^([0-9a-f]{62})\.idx$/;

/**
 * Safe against concurrent publishers anywhere, even with no grace period.
 * @throws EBADOPTION; ETIMEOUT when another collection holds the lock; EDISK.
 */
export async function collectStore(
  store: Store,
  own: DirectoryPacks,
  hooks: CollectHooks,
  options: GcOptions = {},
): Promise<GcReport> {
  const started = Date.now();
  const graceMs = graceOf(options);
  const dryRun = options.dryRun === true;
  const step = async (s: GcStep) => {
    await options.onStep?.(s);
  };
  const lock = dryRun ? undefined : await acquireGcLock(store, options.lockTimeoutMs ?? 30_000);
  let roots: RootScan | undefined;
  try {
    const report = emptyReport(dryRun, graceMs);
    report.trashRecovered = dryRun ? 0 : await recoverTrash(store);
    if (!dryRun) await hooks.whileLocked?.();
    // Our own pack is sealed first, so it can be rewritten like any other's.
    if (!dryRun) await own.writer.seal();
    // The order below is the safety argument: blobs first, then pins, then records.
    const listed = await listBlobs(store);
    // Packed blobs are listed with the files; a packed blob's age is its pack's.
    const packs = await listPacks(store);
    const all = new Map(listed);
    const packedAt = new Map<string, { path: string; entry: (typeof packs)[number]['entries'][number] }>();
    for (const p of packs) {
      for (const e of p.entries) {
        if (!all.has(e.digest)) all.set(e.digest, { bytes: e.length, mtimeMs: p.mtimeMs });
        if (!packedAt.has(e.digest)) packedAt.set(e.digest, { path: p.path, entry: e });
      }
    }
    report.scanned = all.size;
    report.packs = packs.length;
    await step('listed');
    const owners = new OwnerCheck();
    const pins = await scanPins(store, owners);
    report.pinned = pins.digests.size;
    await step('pins');
    roots = await hooks.roots(store);
    report.roots = roots.digests.size;
    await step('roots');

    const now = Date.now();
    const young: string[] = [];
    for (const [d, b] of all) if (insideGrace(now, b.mtimeMs, graceMs)) young.push(d);
    report.young = young.length;
    const marked = await markReachable([roots.digests, pins.digests, young], async (d) => {
      const b = all.get(d);
      if (!b || b.bytes > MAX_MANIFEST_BYTES) return [];
      const at = listed.has(d) ? undefined : packedAt.get(d);
      const streams = at ? await packedManifestStreams(store, d, at.path, at.entry) : await manifestStreams(store, d);
      return streams.length > 0 || !at ? streams : manifestStreams(store, d);
    });
    await step('marked');

    const candidates = [...listed.keys()].filter((d) => !marked.has(d)).sort();
    // Packs are rewritten whole: those with an unmarked blob that their owner can no longer append to.
    const repack = packs.filter((p) => mayRepack(p, owners) && p.entries.some((e) => !marked.has(e.digest)));
    if (dryRun) {
      report.removed = candidates.length;
      for (const d of candidates) report.bytesFreed += (listed.get(d) as ListedBlob).bytes;
      const packedDead = new Map<string, number>();
      for (const p of repack) for (const e of p.entries) if (!marked.has(e.digest)) packedDead.set(e.digest, e.length);
      report.removed += packedDead.size;
      for (const n of packedDead.values()) report.bytesFreed += n;
    } else {
      const swept = await sweep(store, candidates, listed, {
        graceMs,
        roots,
        step,
        packs: { packs: repack, marked, index: own.index },
      });
      report.removed = swept.removed;
      report.bytesFreed = swept.bytesFreed;
      report.restored = swept.restored;
      report.indexRemoved = swept.indexRemoved;
      report.packsRemoved = swept.packsRemoved;
      report.packedCopied = swept.packedCopied;
    }
    report.kept = Math.max(0, report.scanned - report.removed);

    report.pinsReclaimed = pins.dead.length;
    if (!dryRun) for (const p of pins.dead) await store.io.unlink(p).catch(() => {});
    const tmp = await reclaimTemporaries(store, owners, dryRun);
    report.tmpReclaimed = tmp.files;
    report.tmpBytesReclaimed = tmp.bytes;
    if (!dryRun) {
      report.indexRemoved += await removeOrphanIndexes(store, graceMs);
      report.indexRemoved += await orphanPackIndexes(store, await readdirOrEmpty(store.io, store.layout.packs));
    }
    report.durationMs = Date.now() - started;
    return report;
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  } finally {
    await roots?.close();
    await lock?.release();
  }
}

/** `seeds`, then whatever marked manifests reference (`streamsOf`), transitively. */
export async function markReachable(
  seeds: Iterable<Iterable<string>>,
  streamsOf: (digest: string) => Promise<readonly string[]>,
): Promise<Set<string>> {
  const marked = new Set<string>();
  const visit: string[] = [];
  const mark = (d: string) => {
    if (marked.has(d)) return;
    marked.add(d);
    visit.push(d);
  };
  for (const set of seeds) for (const d of set) mark(d);
  while (visit.length > 0) for (const s of await streamsOf(visit.pop() as string)) mark(s);
  return marked;
}

/** The grace period `options` ask for. @throws BadOptionError (EBADOPTION) when it is not a non-negative number. */
export function graceOf(options: GcOptions): number {
  const graceMs = options.graceMs ?? DEFAULT_GC_GRACE_MS;
  if (!Number.isFinite(graceMs) || graceMs < 0) {
    throw new BadOptionError(`graceMs must be a non-negative number, got ${JSON.stringify(options.graceMs)}`);
  }
  return graceMs;
}

/** A report of nothing found yet. */
export function emptyReport(dryRun: boolean, graceMs: number): GcReport {
  return {
    dryRun,
    graceMs,
    scanned: 0,
    kept: 0,
    removed: 0,
    bytesFreed: 0,
    roots: 0,
    pinned: 0,
    young: 0,
    restored: 0,
    tmpReclaimed: 0,
    tmpBytesReclaimed: 0,
    pinsReclaimed: 0,
    indexRemoved: 0,
    trashRecovered: 0,
    packs: 0,
    packsRemoved: 0,
    packedCopied: 0,
    durationMs: 0,
  };
}

/** Removes temporary files whose owner is dead (never others, never a blanket delete). */
export async function reclaimTemporaries(
  store: Store,
  owners: OwnerCheck,
  dryRun: boolean,
): Promise<{ files: number; bytes: number }> {
  const out = { files: 0, bytes: 0 };
  for (const name of await readdirOrEmpty(store.io, store.layout.tmp)) {
    const pid = ownerPid(name);
    if (pid === undefined) continue;
    const path = join(store.layout.tmp, name);
    const st = await store.io.stat(path).catch(() => undefined);
    if (!st?.isFile() || owners.alive(pid, st.mtimeMs, name)) continue;
    if (!dryRun) {
      try {
        await store.io.unlink(path);
      } catch {
        continue;
      }
    }
    out.files++;
    out.bytes += st.size;
  }
  return out;
}

/** Removes line indexes older than the grace period whose blob is absent. */
async function removeOrphanIndexes(store: Store, graceMs: number): Promise<number> {
  let removed = 0;
  const now = Date.now();
  for (const prefix of await readdirOrEmpty(store.io, store.layout.index)) {
    if (!PREFIX.test(prefix)) continue;
    for (const name of await readdirOrEmpty(store.io, join(store.layout.index, prefix)).catch(() => [] as string[])) {
      const m = INDEX_NAME.exec(name);
      if (!m) continue;
      const st = await store.io.stat(join(store.layout.index, prefix, name)).catch(() => undefined);
      if (!st || insideGrace(now, st.mtimeMs, graceMs)) continue;
      if (await removeIndexOfAbsentBlob(store, prefix + m[1])) removed++;
    }
  }
  return removed;
}
