/**
 * The sessions' GC roots ({@link RootSource}): every blob a live call
 * references, and every digest a corrupt line mentions, which it cannot be
 * trusted to say is unreferenced. An unreadable log fails the collection.
 */
import { promises as fsp } from 'node:fs';
import type { RootScan } from '../../store/gc/roots.js';
import type { Store } from '../../store/store.js';
import { toSluiceError } from '../protocol/errors.js';
import { listSessionIds } from './catalog.js';
import { type OpenEventLog, openEventLog, scanOpenLog } from './log-reader.js';
import type { SessionRecord } from './records.js';
import { eventLogPath } from './session-id.js';
import { callReferences, recordReferences, referenceView, SessionFold } from './state.js';

/** What the session logs say. */
export interface SessionRoots {
  /** Digests referenced by live calls (and mentioned by corrupt lines). */
  readonly digests: ReadonlySet<string>;
  sessions: number;
  /** Live calls whose references were taken. */
  liveCalls: number;
}

/** Logs held open from a collection's scan to its re-check: a held descriptor pins its inode, so the re-check reads only what was appended. */
export const MAX_HELD_LOGS = 256;

/** One scanned log: the file as it was opened, and where its complete lines ended. */
interface HeldLog {
  id: string;
  log: OpenEventLog;
  end: number;
  ino: bigint;
  dev: bigint;
}

/** A scan of every session log that can later tell what was appended since; close it after the sweep's re-check. */
export interface SessionScan extends SessionRoots, RootScan {
  /**
   * Every digest referenced by a record written since the scan, reverted
   * calls included: what this returns is kept, so over-counting is safe.
   */
  appended(): Promise<Set<string>>;
  close(): Promise<void>;
}

/** Reads every session log and collects its live calls' references; EDISK when a session cannot be read (its log may hold roots). */
export async function scanSessions(store: Store): Promise<SessionScan> {
  const held: HeldLog[] = [];
  const digests = new Set<string>();
  const scan: SessionScan = {
    digests,
    sessions: 0,
    liveCalls: 0,
    appended: () => appendedSince(store, held),
    close: async () => {
      for (const h of held.splice(0)) await h.log.close();
    },
  };
  try {
    for (const id of await listSessionIds(store)) {
      const log = await openIfPresent(store, id);
      // Deleted since the listing: no longer roots.
      if (!log) continue;
      let keep = false;
      try {
        const fold = new SessionFold();
        const st = await log.fh.stat({ bigint: true });
        const counts = await scanOpenLog(log, (r) => fold.add(referenceView(r)));
        scan.sessions++;
        for (const d of counts.corruptDigests) digests.add(d);
        for (const call of fold.state().live) {
          scan.liveCalls++;
          for (const d of callReferences(call).keys()) digests.add(d);
        }
        if (held.length < MAX_HELD_LOGS) {
          held.push({ id, log, end: counts.end, ino: st.ino, dev: st.dev });
          keep = true;
        }
      } finally {
        if (!keep) await log.close();
      }
    }
  } catch (err) {
    await scan.close();
    throw toSluiceError(err, 'EDISK');
  }
  return scan;
}

/** Session `id`'s log, open; undefined when the session is gone. */
async function openIfPresent(store: Store, id: string): Promise<OpenEventLog | undefined> {
  try {
    return await openEventLog(store, id);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOTFOUND') return undefined;
    throw err;
  }
}

async function appendedSince(store: Store, held: readonly HeldLog[]): Promise<Set<string>> {
  const out = new Set<string>();
  const take = (r: SessionRecord) => {
    for (const d of recordReferences(r)) out.add(d);
  };
  const whole = new Set<string>();
  try {
    const byId = new Map(held.map((h) => [h.id, h]));
    for (const h of held) {
      // An S3 session's mirror first takes in the batches any host wrote since; one that changed is read anew.
      if (h.log.refresh && !(await h.log.refresh())) whole.add(h.id);
      // The file the scan read, even if its session was deleted or replaced meanwhile.
      const tail = await scanOpenLog(h.log, take, h.end);
      for (const d of tail.corruptDigests) out.add(d);
    }
    for (const id of await listSessionIds(store)) {
      const h = byId.get(id);
      if (!h) {
        // A session created since the scan, or one whose log the scan did not keep open.
        whole.add(id);
        continue;
      }
      // Its refresh above compared it with the bucket.
      if (h.log.refresh) continue;
      const st = await fsp.stat(eventLogPath(store.layout, id), { bigint: true }).catch((err: unknown) => {
        if ((err as { code?: unknown }).code === 'ENOENT') return undefined;
        throw err;
      });
      // Another file at the path: the session was deleted and created again.
      if (st && (st.ino !== h.ino || st.dev !== h.dev)) whole.add(id);
    }
    for (const id of whole) {
      const log = await openIfPresent(store, id);
      if (!log) continue;
      try {
        const all = await scanOpenLog(log, take);
        for (const d of all.corruptDigests) out.add(d);
      } finally {
        await log.close();
      }
    }
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  }
  return out;
}
