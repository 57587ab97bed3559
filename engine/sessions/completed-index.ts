/** A session's calls that already have an outcome, for a batch that resumes: one scan keeps where each call's records are, not the records. */
import type { Store } from '../../store/store.js';
import type { TerminalResult } from '../result.js';
import { type LinePlace, type OpenEventLog, openEventLog, scanOpenLog } from './log-reader.js';
import {
  CALL_COMPLETED,
  CALL_STARTED,
  type CompletedRecord,
  type SessionRecord,
  type StartedRecord,
} from './records.js';
import { replayCall } from './replay.js';
import { SessionFold } from './state.js';

/** Recorded outcomes of a session's batch calls: an item runs as `<id>`, a later attempt as `<id>#<n>`, so a call id is never reused. */
export interface CompletedIndex {
  /** True when item `id` has an attempt with a recorded outcome a resumed batch keeps (not cancelled, not reverted). */
  has(id: string): boolean;
  /** Item `id`'s recorded terminal result, as replay rebuilds it. */
  result(id: string): Promise<TerminalResult>;
  /** The call id the next attempt of item `id` runs as. */
  nextCallId(id: string): string;
  /** Closes the log (idempotent). */
  close(): Promise<void>;
}

interface Places {
  started?: LinePlace;
  completed?: LinePlace;
}

/** Indexes session `id`'s calls with an outcome other than `cancelled` (a cancelled or interrupted call runs again); a missing session has none. */
export async function openCompletedIndex(store: Store, id: string): Promise<CompletedIndex> {
  let log: OpenEventLog;
  try {
    log = await openEventLog(store, id);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOTFOUND') return emptyIndex();
    throw err;
  }
  const fold = new SessionFold();
  const places = new Map<string, Places>();
  const cancelled = new Set<string>();
  try {
    await scanOpenLog(log, (r, place) => {
      if (r.type === CALL_STARTED || r.type === CALL_COMPLETED) {
        fold.add({ type: r.type, callId: r.callId } as SessionRecord);
        const at = places.get(r.callId) ?? {};
        if (r.type === CALL_STARTED) at.started ??= place;
        else if (!at.completed) {
          at.completed = place;
          if (r.status === 'cancelled') cancelled.add(r.callId);
        }
        places.set(r.callId, at);
      } else fold.add(r);
    });
  } catch (err) {
    await log.close();
    throw err;
  }
  const kept = new Map<string, { callId: string; at: Places }>();
  const attempts = new Map<string, number>();
  for (const [callId] of places) {
    const id = itemOf(callId);
    attempts.set(id, (attempts.get(id) ?? 0) + 1);
  }
  for (const e of fold.state().live) {
    const at = places.get(e.callId);
    if (at?.completed && !cancelled.has(e.callId)) kept.set(itemOf(e.callId), { callId: e.callId, at });
  }
  places.clear();
  return {
    has: (id) => kept.has(id),
    nextCallId: (id) => {
      const n = attempts.get(id) ?? 0;
      return n === 0 ? id : `${id}#${n + 1}`;
    },
    async result(itemId) {
      const found = kept.get(itemId);
      if (!found) throw new Error(`item ${itemId} has no recorded outcome`);
      const { callId, at } = found;
      const started = at.started ? ((await log.recordAt(at.started)) as StartedRecord | undefined) : undefined;
      const completed = at.completed ? ((await log.recordAt(at.completed)) as CompletedRecord | undefined) : undefined;
      const e = { callId, reverted: false, ...(started ? { started } : {}), ...(completed ? { completed } : {}) };
      return (await replayCall(store, id, e)).result;
    },
    close: () => log.close(),
  };
}

/** The batch item a call id belongs to: `<id>` and `<id>#<n>` are attempts of item `<id>`. */
function itemOf(callId: string): string {
  const m = /^(.+)#[0-9]+$/.exec(callId);
  return m ? (m[1] as string) : callId;
}

function emptyIndex(): CompletedIndex {
  return {
    has: () => false,
    nextCallId: (id) => id,
    result: (callId) => Promise.reject(new Error(`call ${callId} has no recorded outcome`)),
    close: async () => {},
  };
}
