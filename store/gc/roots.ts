/**
 * What a collection keeps whatever its age, as the store's owner supplies
 * it. The store knows blobs, pins and tombstones; which blobs are referenced
 * (by live session records, in sluice) is the owner's to say: the collector
 * is a step of the store, and the roots are the filter deciding what lives.
 */
import type { Store } from '../store.js';

/**
 * One reading of the roots, held open from the collection's scan to its
 * sweep's re-check.
 */
export interface RootScan {
  /** Every digest the roots reference at the scan. */
  readonly digests: ReadonlySet<string>;
  /**
   * Every digest referenced by a root added since the scan. Over-counting is
   * safe (what this returns is kept); under-counting loses data, so a root
   * that cannot be read must reject (EDISK), never be skipped.
   */
  appended(): Promise<Set<string>>;
  /** Releases what the scan held open (idempotent). */
  close(): Promise<void>;
}

/**
 * Reads the roots of `store`. Rejects (EDISK) when a root cannot be read:
 * what cannot be read may reference blobs.
 */
export type RootSource = (store: Store) => Promise<RootScan>;
