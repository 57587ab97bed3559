/**
 * Folding a session's records into its calls: `session.revert` with
 * `before: X` reverts X and every later live call; calls first seen after
 * it are live again, and a revert of a call not live there is ignored.
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
  calls: CallEntry[];
  live: CallEntry[];
  reverts: number;
  /** Revert records that named a call that was not live at that point. */
  ignoredReverts: number;
}

/** Folds records one at a time, in log order (see the module comment for the rules). */
export class SessionFold {
  private readonly byId = new Map<string, CallEntry>();
  private readonly calls: CallEntry[] = [];
  private live: CallEntry[] = [];
  private reverts = 0;
  private ignoredReverts = 0;

  add(r: SessionRecord): void {
    if (r.type === CALL_STARTED) {
      const e = this.entry(r.callId);
      e.started ??= r;
    } else if (r.type === CALL_COMPLETED) {
      const e = this.entry(r.callId);
      e.completed ??= r;
    } else {
      const at = this.live.findIndex((e) => e.callId === r.before);
      if (at === -1) {
        this.ignoredReverts++;
        return;
      }
      for (const e of this.live.slice(at)) e.reverted = true;
      this.live = this.live.slice(0, at);
      this.reverts++;
    }
  }

  state(): SessionState {
    return { calls: this.calls, live: this.live, reverts: this.reverts, ignoredReverts: this.ignoredReverts };
  }

  private entry(callId: string): CallEntry {
    let e = this.byId.get(callId);
    if (!e) {
      e = { callId, reverted: false };
      this.byId.set(callId, e);
      this.calls.push(e);
      this.live.push(e);
    }
    return e;
  }
}

/** Folds `records` (in log order) into the session's calls. */
export function foldSession(records: readonly SessionRecord[]): SessionState {
  const fold = new SessionFold();
  for (const r of records) fold.add(r);
  return fold.state();
}

/** A record reduced to what references and counts need, so that GC, verify and listings do not grow with display and model text. */
export function referenceView(r: SessionRecord): SessionRecord {
  if (r.type === CALL_STARTED) {
    const v: StartedRecord = { type: r.type, callId: r.callId, tool: r.tool };
    if (r.spill) v.spill = r.spill;
    return v;
  }
  if (r.type === CALL_COMPLETED) {
    const v: CompletedRecord = { type: r.type, callId: r.callId, status: r.status, output: r.output };
    if (r.spill) v.spill = r.spill;
    if (r.fullText) v.fullText = r.fullText;
    return v;
  }
  return r;
}

/** What a record reference points at. */
export type ReferenceRole = 'output' | 'manifest' | 'stream' | 'spill' | 'text';

/**
 * Every blob a call's records reference, with its role: output blob or
 * manifest and streams, spill blobs, whole texts. Digests elsewhere in the
 * output reference (a layout this version does not know) count as `output`,
 * so GC keeps them too.
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
    for (const t of [c.fullText?.error, c.fullText?.display]) if (t && !refs.has(t.digest)) refs.set(t.digest, 'text');
  }
  if (e.started?.spill) refs.set(e.started.spill.digest, 'spill');
  return refs;
}

/** Every blob one record references, on its own (no fold, no reverts): what the collector's re-check keeps of records appended after its scan. */
export function recordReferences(r: SessionRecord): string[] {
  const e: CallEntry = { callId: '', reverted: false };
  if (r.type === CALL_STARTED) e.started = r;
  else if (r.type === CALL_COMPLETED) e.completed = r;
  else return [];
  return [...callReferences(e).keys()];
}
