/**
 * Garbage collection as the engine runs it: the store's collector
 * (store/gc/collect.ts) with the sessions' live records as its roots, and,
 * under the collector's lock, the reaping of process groups whose engine
 * died (engine/processes/orphans.ts).
 */
import type { CollectHooks, GcOptions, GcReport as StoreGcReport } from '../../store/gc/collect.js';
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
  const { durationMs, ...report } = await store.backend.collect(hooks, options);
  return { ...report, orphanGroupsKilled, durationMs };
}
