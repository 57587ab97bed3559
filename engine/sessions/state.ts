/**
 * Folding a session's records into its calls, applying reverts.
 *
 * Calls are ordered by their first record in the log (normally
 * `call.started`). A `session.revert` record with `before: X` reverts X and
 * every call that is live at that point of the log and came after X; calls
 * whose first record comes later are live again (new history). A revert of a
 * call that is not live at that point (unknown, or already reverted) changes
 * nothing and is counted in `ignoredReverts`. A call reverted while it was
 * still running stays reverted when its completion is appended later.
 */
import {
  CALL_COMPLETED,
  CALL_STARTED,
  type CompletedRecord,
  digestsIn,
  parseOutputRef,
  type SessionRecord,
  type StartedRecord,
} from './records.js';

/** One call of a session as the log tells it. */
export interface CallEntry {
  callId: string;
  started?: StartedRecord;
  completed?: CompletedRecord;
  /** True once a revert covered this call. */
  reverted: boolean;
}

/** A session's calls after applying its reverts. */
export interface SessionState {
  /** Every call, live or reverted, in log order. */
  calls: CallEntry[];
  /** Calls not reverted, in log order. */
  live: CallEntry[];
  /** Revert records that reverted something. */
  reverts: number;
  /** Revert records that named a call that was not live at that point. */
  ignoredReverts: number;
}

/** Folds `records` (in log order) into the session's calls. */
export function foldSession(records: readonly SessionRecord[]): SessionState {
  const byId = new Map<string, CallEntry>();
  const calls: CallEntry[] = [];
  let live: CallEntry[] = [];
  let reverts = 0;
  let ignoredReverts = 0;
  const entry = (callId: string): CallEntry => {
    let e = byId.get(callId);
    if (!e) {
      e = { callId, reverted: false };
      byId.set(callId, e);
      calls.push(e);
      live.push(e);
    }
    return e;
  };
  for (const r of records) {
    if (r.type === CALL_STARTED) {
      const e = entry(r.callId);
      e.started ??= r;
    } else if (r.type === CALL_COMPLETED) {
      const e = entry(r.callId);
      e.completed ??= r;
    } else {
      const at = live.findIndex((e) => e.callId === r.before);
      if (at === -1) {
        ignoredReverts++;
        continue;
      }
      for (const e of live.slice(at)) e.reverted = true;
      live = live.slice(0, at);
      reverts++;
    }
  }
  return { calls, live, reverts, ignoredReverts };
}

/** What a record reference points at. */
export type ReferenceRole = 'output' | 'manifest' | 'stream' | 'spill';

/**
 * Every blob a call's records reference, with its role: the output blob or
 * the manifest and its streams, and spill blobs (large arguments or fields).
 * Digests found anywhere else in the output reference (a layout this
 * version does not know) count as `output`, so GC keeps them too.
 */
export function callReferences(e: CallEntry): Map<string, ReferenceRole> {
  const refs = new Map<string, ReferenceRole>();
  const c = e.completed;
  if (c) {
    const out = parseOutputRef(c.output);
    if (out?.kind === 'single') refs.set(out.digest, 'output');
    if (out?.kind === 'streams') {
      refs.set(out.manifest, 'manifest');
      for (const s of out.streams) refs.set(s.digest, 'stream');
    }
    for (const d of digestsIn(c.output)) if (!refs.has(d)) refs.set(d, 'output');
    if (c.spill) refs.set(c.spill.digest, 'spill');
  }
  if (e.started?.spill) refs.set(e.started.spill.digest, 'spill');
  return refs;
}
