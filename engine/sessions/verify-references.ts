/** Verify with sessions: the store audit plus live calls' references to missing blobs (reverted calls may have been collected, as intended). */
import type { Store } from '../../store/store.js';
import { tombstoned } from '../../store/tombstone.js';
import type { VerifyOptions, VerifyReport } from '../../store/verify.js';
import { foldReferences, listSessionIds } from './catalog.js';
import { callReferences, type ReferenceRole } from './state.js';

/** A live record that references a blob the store lacks. */
export interface MissingReference {
  session: string;
  callId: string;
  digest: string;
  /** What the blob is to the call: its output, manifest, a stream, or a spill blob (large arguments or fields). */
  role: ReferenceRole;
}

/** The store report plus the session checks. */
export interface SessionVerifyReport extends VerifyReport {
  /** References of live calls to missing blobs, by session, then log order. */
  records: MissingReference[];
  /** Log lines skipped as torn or corrupt, over all sessions. */
  corruptLines: number;
}

/**
 * Audits `store` and its session logs; with `repair`, corrupt blobs go to
 * quarantine/ first. A referenced blob among a collection's tombstones is
 * `tombstoned`, not missing: readers find it.
 */
export async function verifyWithSessions(store: Store, options: VerifyOptions = {}): Promise<SessionVerifyReport> {
  const base = await store.verify(options);
  const found: MissingReference[] = [];
  let corruptLines = 0;
  const present = new Map<string, boolean>();
  for (const session of await listSessionIds(store)) {
    const folded = await foldReferences(store, session);
    if (!folded) continue;
    corruptLines += folded.log.corrupt;
    for (const call of folded.state.live) {
      for (const [digest, role] of callReferences(call)) {
        let has = present.get(digest);
        if (has === undefined) {
          has = await store.hasBlob(digest);
          present.set(digest, has);
        }
        if (!has) found.push({ session, callId: call.callId, digest, role });
      }
    }
  }
  const aside = await tombstoned(
    store,
    found.map((r) => r.digest),
  );
  const records = found.filter((r) => !aside.has(r.digest));
  const tombstones = [...new Set([...base.tombstoned, ...aside])].sort();
  return { ...base, tombstoned: tombstones, records, corruptLines };
}
