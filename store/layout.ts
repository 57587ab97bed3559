/**
 * Where things live inside a store directory. One place so that the store,
 * GC, verify and the docs agree.
 *
 *     <root>/blobs/sha256/<2 hex>/<62 hex>   content, mode 0600, immutable
 *     <root>/index/sha256/<2 hex>/<62 hex>   sparse line index of a large blob (a cache)
 *     <root>/packs/<pid>-<random>.pack       small blobs, appended by process <pid> (store/pack-format.ts)
 *     <root>/packs/<pid>-<random>.idx        where a pack's blobs are (a cache, rebuilt from the pack)
 *     <root>/tmp/<pid>-<random>.<kind>       temporary files, owned by process <pid>
 *     <root>/pins/<pid>-<random>.pin         GC roots held by live process <pid>
 *     <root>/sessions/<id>/events.log        session event logs (engine/sessions/)
 *     <root>/gc/lock/<pid>-<token>.owner      held by the running garbage collection (store/gc/lock.ts)
 *     <root>/gc/trash/<pid>-<random>/<digest> blobs a collection is about to delete (tombstones)
 *     <root>/quarantine/<digest>.<inode>      corrupt blobs `sluice verify --repair` moved aside (never read)
 *     <root>/procs/<pid>-<random>.pgids      process groups of engine <pid>'s calls (for the orphan reaper)
 *     <root>/cache/sha256/<2 hex>/<62 hex>.<16 hex>  (S3 store) local copies of blobs read (store/s3/read-cache.ts)
 *     <root>/cache/packs/<32 hex>                      (S3 store) indexes of pack objects read (store/s3/pack-index-cache.ts)
 *     <root>/reserve                         space kept free to finish calls on a full disk (store/space-reserve.ts)
 */
import { join } from 'node:path';

/** Resolved paths of one store. */
export class StoreLayout {
  readonly root: string;
  readonly blobs: string;
  readonly index: string;
  /** Pack files of small blobs and their indexes. */
  readonly packs: string;
  readonly tmp: string;
  readonly pins: string;
  readonly sessions: string;
  /** Garbage-collection state: the lock directory and the tombstone directories. */
  readonly gc: string;
  /** Tombstones: blobs a collection moved aside while it re-checks the pins (readers look here on a miss). */
  readonly trash: string;
  /** Corrupt blobs moved aside by a repairing verify, kept for an operator to inspect. */
  readonly quarantine: string;
  /** Journals of the process groups engines' calls run, written by their watchdogs (engine/processes/process-guard.ts). */
  readonly procs: string;
  /** An S3 store's read cache of blobs (store/s3/read-cache.ts). */
  readonly cache: string;
  /** An S3 store's cache of pack objects' indexes (store/s3/pack-index-cache.ts). */
  readonly packIndexes: string;
  /** Space kept free to finish calls on a full disk (store/space-reserve.ts). */
  readonly reserve: string;

  constructor(root: string) {
    this.root = root;
    this.blobs = join(root, 'blobs', 'sha256');
    this.index = join(root, 'index', 'sha256');
    this.packs = join(root, 'packs');
    this.tmp = join(root, 'tmp');
    this.pins = join(root, 'pins');
    this.sessions = join(root, 'sessions');
    this.gc = join(root, 'gc');
    this.trash = join(root, 'gc', 'trash');
    this.quarantine = join(root, 'quarantine');
    this.procs = join(root, 'procs');
    this.cache = join(root, 'cache', 'sha256');
    this.packIndexes = join(root, 'cache', 'packs');
    this.reserve = join(root, 'reserve');
  }

  /** Path of the blob with `digest` (which must already be validated as 64 lowercase hex). */
  blobPath(digest: string): string {
    return join(this.blobs, digest.slice(0, 2), digest.slice(2));
  }

  /** Path of the cached line index of the blob with `digest`. */
  indexPath(digest: string): string {
    return join(this.index, digest.slice(0, 2), `${digest.slice(2)}.idx`);
  }
}
