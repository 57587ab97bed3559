/** Garbage collection as the engine runs it: the store's collector with the sessions' live records as roots, and the orphan reaper under its lock. */
import { blobBackendOf } from '../../store/backend.js';
import {
  type CollectHooks,
  collectStore,
  type GcOptions,
  type GcReport as StoreGcReport,
} from '../../store/gc/collect.js';
import type { S3Blobs } from '../../store/s3/blobs.js';
import type { Store } from '../../store/store.js';
import { reapOrphans } from '../processes/orphans.js';
import { scanSessions } from './roots.js';

export type { GcOptions, GcStep } from '../../store/gc/collect.js';
/** Default grace period of a collection. */
export { DEFAULT_GC_GRACE_MS } from '../../store/gc/collect.js';

/** What a collection found and did (with `dryRun`: would do). */
export interface GcReport extends Omit<StoreGcReport, 'durationMs'> {
  /** Process groups of calls whose engine died (with its watchdog) killed (engine/processes/orphans.ts). */
  orphanGroupsKilled: number;
  durationMs: number;
}

/** Collects blobs no live record or pin references, older than the grace period; safe against concurrent publishers even at 0. */
export async function collectGarbage(store: Store, options: GcOptions = {}): Promise<GcReport> {
  let orphanGroupsKilled = 0;
  const hooks: CollectHooks = {
    roots: scanSessions,
    whileLocked: async () => {
      orphanGroupsKilled = (await reapOrphans(store)).killed;
    },
  };
  const backend = blobBackendOf(store);
  // An S3 store: leases, the lock object and tombstone markers, across every host on the bucket.
  const collect = backend
    ? (await import('../../store/s3/collect.js')).collectS3Store(store, backend as S3Blobs, hooks, options)
    : collectStore(store, hooks, options);
  const { durationMs, ...report } = await collect;
  return { ...report, orphanGroupsKilled, durationMs };
}
