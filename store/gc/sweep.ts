/**
 * Deleting blobs safely while publishers run: every candidate is renamed
 * into this collection's trash (`gc/trash/<pid>-<random>/<digest>`, in the
 * store, so atomically); then, in this order, it re-reads (1) the pins,
 * (2) the roots added since the scan, (3) the manifests placed since the
 * listing, and puts back every tombstone they name (transitively) or that
 * is inside the grace period; only then are the others unlinked.
 *
 * Why nothing is lost, whatever the timestamps (docs/operations.md): a
 * publisher pins before it refreshes or places. A refresh after the rename
 * fails and the publisher places its own copy; one before it was preceded by
 * the pin, read in (1), unless released, and a release follows the durable
 * record (2) or the placed manifest (3). Restoring over a publisher's copy is
 * harmless: the content is the same. A dead collection's trash is restored
 * by the next one.
 */
import { join } from 'node:path';
import { toSluiceError } from '../../engine/protocol/errors.js';
import { crashPoint } from '../crash-point.js';
import { INDEX_MIN_BLOB_BYTES } from '../line-index.js';
import { readdirOrEmpty } from '../owned-files.js';
import { OwnerCheck, ownedName, ownerPid } from '../owners.js';
import { type ListedPack, listPacks, PACK_NAME, type PackIndex } from '../pack-index.js';
import type { Store } from '../store.js';
import { insideGrace, type ListedBlob, manifestStreams, packedManifestStreams, placedSince } from './blobs.js';
import { scanPins } from './pin-scan.js';
import { dropPack, RepackTarget, readPackedChecked, restorePack, tombstonePack } from './repack.js';
import type { RootScan } from './roots.js';

/** Named points of a collection, for tests that interleave it with publishers. */
export type GcStep =
  | 'listed'
  | 'pins'
  | 'roots'
  | 'marked'
  | 'repacked'
  | 'tombstone'
  | 'recheck'
  | 'relisted'
  | 'unlink';

/** What a sweep did. */
export interface SweepResult {
  removed: number;
  bytesFreed: number;
  restored: number;
  indexRemoved: number;
  /** Packs rewritten or dropped (their live blobs copied into a new pack first). */
  packsRemoved: number;
  /** Packed blobs copied into the collection's new pack. */
  packedCopied: number;
}

/** A sweep that did nothing (yet). */
export function emptySweep(): SweepResult {
  return { removed: 0, bytesFreed: 0, restored: 0, indexRemoved: 0, packsRemoved: 0, packedCopied: 0 };
}

/** The packs a sweep rewrites: each has a blob the mark left unmarked. */
export interface PackSweep {
  packs: readonly ListedPack[];
  marked: ReadonlySet<string>;
  /** The store's map of packed blobs, told of what the sweep moves and copies. */
  index: PackIndex;
}

/** A blob of a moved pack: where it is now. */
interface MovedPacked {
  trashPath: string;
  offset: number;
  length: number;
}

const isMissing = (err: unknown) => (err as { code?: unknown }).code === 'ENOENT';

/** What {@link sweep} is given besides its candidates. */
export interface SweepOptions {
  graceMs: number;
  roots: RootScan;
  step: (s: GcStep) => Promise<void>;
  packs: PackSweep;
}

/** Tombstones `candidates`, re-checks them (see the module comment), puts back what must stay, deletes the rest. */
export async function sweep(
  store: Store,
  candidates: readonly string[],
  listed: ReadonlyMap<string, ListedBlob>,
  opts: SweepOptions,
): Promise<SweepResult> {
  if (candidates.length === 0 && opts.packs.packs.length === 0) return emptySweep();
  const trash = join(store.layout.trash, ownedName());
  await store.io.mkdir(trash);
  const run = new SweepRun(store, trash, listed, opts);
  try {
    await run.tombstonePacks(await run.copyLivePacked());
    await run.tombstoneBlobs(candidates);
    const keep = await run.recheck();
    await run.keepYoung(keep);
    await run.restoreKept(keep);
    await run.deleteRest();
  } catch (err) {
    // Whatever is still tombstoned goes back: a failed collection must not lose a blob.
    await run.putBack();
    throw toSluiceError(err, 'EDISK');
  } finally {
    await run.finish();
  }
  return run.result;
}

/** One sweep's tombstones and outcome; each step of {@link sweep} is a method. */
class SweepRun {
  readonly result = emptySweep();
  /** Blob files moved into the trash, by digest. */
  private readonly moved = new Set<string>();
  private readonly target: RepackTarget;
  /** Moved packs (trash path). */
  private readonly movedPacks: string[] = [];
  /** The blobs in the moved packs that no other moved pack or the target holds. */
  private readonly movedPacked = new Map<string, MovedPacked>();
  /** Each moved pack's blobs, for the grace re-check by the pack's own mtime. */
  private readonly movedEntries: Array<{ trashPath: string; entries: readonly { digest: string }[] }> = [];

  constructor(
    private readonly store: Store,
    private readonly trash: string,
    private readonly listed: ReadonlyMap<string, ListedBlob>,
    private readonly opts: SweepOptions,
  ) {
    this.target = new RepackTarget(store, opts.packs.index);
  }

  // Durably (store/gc/repack.ts, step 1); only packs whose live blobs all read back intact may go.
  async copyLivePacked(): Promise<ListedPack[]> {
    const { packs, marked } = this.opts.packs;
    const rewritable: ListedPack[] = [];
    for (const p of packs) {
      const live: Array<{ digest: string; content: Buffer }> = [];
      let intact = true;
      for (const e of p.entries) {
        if (!marked.has(e.digest) || this.target.holds(e.digest)) continue;
        const content = await readPackedChecked(this.store, p.path, e);
        // A live blob that does not hash right is left where it is, for verify to report; so is its pack.
        if (!content) {
          intact = false;
          break;
        }
        live.push({ digest: e.digest, content });
      }
      if (!intact) continue;
      for (const l of live) await this.target.add(l.digest, l.content);
      rewritable.push(p);
    }
    await this.target.sync();
    crashPoint('repack-copied');
    await this.opts.step('repacked');
    return rewritable;
  }

  /** Moves the packs `rewritable` into the trash. */
  async tombstonePacks(rewritable: readonly ListedPack[]): Promise<void> {
    for (const p of rewritable) {
      await this.opts.step('tombstone');
      if (!(await tombstonePack(this.store, p.path, this.trash, this.opts.packs.index))) continue;
      const trashPath = join(this.trash, p.name);
      this.movedPacks.push(trashPath);
      this.movedEntries.push({ trashPath, entries: p.entries });
      for (const e of p.entries) {
        if (!this.target.holds(e.digest) && !this.movedPacked.has(e.digest)) {
          this.movedPacked.set(e.digest, { trashPath, offset: e.offset, length: e.length });
        }
      }
    }
    if (this.movedPacks.length > 0) crashPoint('repack-tombstoned');
  }

  /** Moves the blob files of `candidates` into the trash (one gone already is no candidate). */
  async tombstoneBlobs(candidates: readonly string[]): Promise<void> {
    for (const d of candidates) {
      await this.opts.step('tombstone');
      try {
        await this.store.io.rename(this.store.layout.blobPath(d), join(this.trash, d));
        this.moved.add(d);
      } catch (err) {
        if (!isMissing(err)) throw err;
      }
    }
  }

  /** The re-check of the module comment: what the pins, the new roots and the manifests placed since name. */
  async recheck(): Promise<Set<string>> {
    const { store, listed } = this;
    await this.opts.step('recheck');
    // A fresh owner check: a pid found dead earlier may belong to a new publisher by now.
    const keep = new Set((await scanPins(store, new OwnerCheck())).digests);
    for (const d of await this.opts.roots.appended()) keep.add(d);
    await this.opts.step('relisted');
    for (const d of await placedSince(store, listed, this.moved)) {
      for (const s of await manifestStreams(store, d)) keep.add(s);
    }
    // Packed blobs published since the listing (or again after their pack was moved) that are manifests.
    if (this.movedPacked.size > 0) {
      for (const p of await listPacks(store)) {
        if (p.path === this.target.path || !PACK_NAME.test(p.name)) continue;
        for (const e of p.entries) {
          if (listed.has(e.digest) && !this.movedPacked.has(e.digest)) continue;
          for (const s of await packedManifestStreams(store, e.digest, p.path, e)) keep.add(s);
        }
      }
    }
    return keep;
  }

  /** Adds to `keep` the tombstones inside the grace period by their own mtime (refreshed since the listing). */
  async keepYoung(keep: Set<string>): Promise<void> {
    const { graceMs } = this.opts;
    if (graceMs <= 0) return;
    const now = Date.now();
    for (const d of this.moved) {
      const st = await this.store.io.stat(join(this.trash, d));
      if (insideGrace(now, st.mtimeMs, graceMs)) keep.add(d);
    }
    // A moved pack touched since the listing (a publisher deduplicated onto one of its blobs before
    // the move) is young again, with every blob in it.
    for (const m of this.movedEntries) {
      const st = await this.store.io.stat(m.trashPath);
      if (insideGrace(now, st.mtimeMs, graceMs))
        for (const e of m.entries) if (this.movedPacked.has(e.digest)) keep.add(e.digest);
    }
  }

  /** Puts back the kept tombstones, and whatever a kept manifest among them references, transitively. */
  async restoreKept(keep: ReadonlySet<string>): Promise<void> {
    const { store, moved, movedPacked } = this;
    const back = [...keep].filter((d) => moved.has(d) || movedPacked.has(d));
    while (back.length > 0) {
      const d = back.pop() as string;
      const packed = movedPacked.get(d);
      if (packed) {
        // Kept after all: copied into the new pack before its old pack goes (step 3).
        movedPacked.delete(d);
        const e = { digest: d, offset: packed.offset, length: packed.length };
        for (const s of await packedManifestStreams(store, d, packed.trashPath, e)) {
          if (moved.has(s) || movedPacked.has(s)) back.push(s);
        }
        const content = await readPackedChecked(store, packed.trashPath, e);
        if (!content) throw Object.assign(new Error(`packed blob ${d} no longer reads back`), { code: 'EIO' });
        await this.target.add(d, content);
        this.result.restored++;
        continue;
      }
      if (!moved.delete(d)) continue;
      const path = join(this.trash, d);
      for (const s of await manifestStreams(store, d, path)) if (moved.has(s) || movedPacked.has(s)) back.push(s);
      await restore(store, path, d);
      this.result.restored++;
    }
  }

  /** Deletes the remaining tombstones, once whatever the old packs held that is kept is durable in the new one (step 4). */
  async deleteRest(): Promise<void> {
    const { store, result } = this;
    await this.target.sync();
    for (const d of [...this.moved].sort()) {
      const size = this.listed.get(d)?.bytes ?? 0;
      await this.opts.step('unlink');
      await store.io.unlink(join(this.trash, d));
      this.moved.delete(d);
      result.removed++;
      result.bytesFreed += size;
      // Only large blobs get an index; a stray one of a small blob is left to the orphan-index pass.
      if (size >= INDEX_MIN_BLOB_BYTES && (await removeIndexOfAbsentBlob(store, d))) result.indexRemoved++;
    }
    for (const [, m] of this.movedPacked) {
      result.removed++;
      result.bytesFreed += m.length;
    }
    result.packedCopied = this.target.copied;
    while (this.movedPacks.length > 0) {
      await this.opts.step('unlink');
      await dropPack(store, this.movedPacks[this.movedPacks.length - 1] as string);
      this.movedPacks.pop();
      result.packsRemoved++;
    }
  }

  /** After a failure: every tombstone still standing goes back. */
  async putBack(): Promise<void> {
    for (const d of this.moved) await restore(this.store, join(this.trash, d), d).catch(() => {});
    for (const p of this.movedPacks) await restorePack(this.store, p).catch(() => {});
  }

  /** Seals the new pack and removes the trash directory (when empty). */
  async finish(): Promise<void> {
    await this.target.finish();
    await this.store.io.rmdir(this.trash).catch(() => {});
  }
}

/** Removes the line index of `digest` unless its blob is present (again). True when one was removed. */
export async function removeIndexOfAbsentBlob(store: Store, digest: string): Promise<boolean> {
  if (await store.hasBlobFile(digest)) return false;
  try {
    await store.io.unlink(store.layout.indexPath(digest));
    return true;
  } catch {
    return false;
  }
}

async function restore(store: Store, path: string, digest: string): Promise<void> {
  if (await store.hasBlobFile(digest)) await store.io.unlink(path);
  else await store.io.rename(path, store.layout.blobPath(digest));
}

/** Owner dead, or this process under the caller's lock; a tombstone whose blob is back is dropped. Returns how many. */
export async function recoverTrash(store: Store): Promise<number> {
  const base = store.layout.trash;
  const owners = new OwnerCheck();
  let recovered = 0;
  for (const name of await readdirOrEmpty(store.io, base)) {
    const dir = join(base, name);
    const st = await store.io.stat(dir).catch(() => undefined);
    if (!st?.isDirectory()) continue;
    const pid = ownerPid(`${name}.trash`);
    if (pid === undefined || (pid !== process.pid && owners.alive(pid, st.mtimeMs, name))) continue;
    for (const entry of await readdirOrEmpty(store.io, dir)) {
      if (PACK_NAME.test(entry)) {
        // A pack moved aside by a collection that died: back into packs/ (its name is unique).
        await restorePack(store, join(dir, entry));
        recovered++;
        continue;
      }
      if (!/^[0-9a-f]{64}$/.test(entry)) continue;
      await restore(store, join(dir, entry), entry);
      recovered++;
    }
    await store.io.rmdir(dir).catch(() => {});
  }
  return recovered;
}
