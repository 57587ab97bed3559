/** The sessions of a store: listing them with counts, reverting one to before a call, deleting one. */
import { promises as fsp, type Stats } from 'node:fs';
import type { Store } from '../../store/store.js';
import { NotFoundError, toSluiceError } from '../protocol/errors.js';
import { type EventLogContents, scanEventLog } from './log-reader.js';
import type { SessionRecorder } from './recorder.js';
import { parseOutputRef } from './records.js';
import { s3RecordsOf } from './s3-batch.js';
import { deleteS3Session, listS3SessionIds } from './s3-sessions.js';
import { assertSessionId, eventLogPath, isSessionId, sessionDir } from './session-id.js';
import { referenceView, SessionFold, type SessionState } from './state.js';

/** One session, counted. */
export interface SessionSummary {
  id: string;
  /** Calls not reverted (including interrupted ones). */
  calls: number;
  /** Calls hidden by reverts. */
  reverted: number;
  /** Live calls without a terminal record (interrupted, or still running elsewhere). */
  interrupted: number;
  /** Log lines skipped as torn or corrupt. */
  corruptLines: number;
  /** Size of the event log in bytes. */
  bytes: number;
  /** Bytes of the distinct artifacts the live calls reference: what GC keeps for this session (shared artifacts count once). */
  referencedBytes: number;
  /** Last change of the event log (ISO time). */
  updatedAt: string;
}

/** Ids of the sessions in `store`, sorted; an unreadable session directory is EDISK, never "no such session" (GC roots come from this list). */
export async function listSessionIds(store: Store): Promise<string[]> {
  // On S3 the bucket says which sessions exist (every host's), not the local directory.
  const s3 = s3RecordsOf(store);
  if (s3) return listS3SessionIds(s3);
  let names: string[];
  try {
    names = await fsp.readdir(store.layout.sessions);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return [];
    throw toSluiceError(err, 'EDISK');
  }
  const ids: string[] = [];
  for (const name of names.sort()) {
    if (!isSessionId(name)) continue;
    let st: Stats;
    try {
      st = await fsp.stat(eventLogPath(store.layout, name));
    } catch (err) {
      // No log (yet, or any more): not a session. Anything else hides what the log says.
      const code = (err as { code?: unknown }).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') continue;
      throw toSluiceError(err, 'EDISK');
    }
    if (st.isFile()) ids.push(name);
  }
  return ids;
}

/** A session folded down to references, with its log's counts. */
export interface FoldedSession {
  state: SessionState;
  log: Omit<EventLogContents, 'records'>;
}

/** Reads session `id` keeping only references and counts, so memory does not grow with its text; undefined when it does not exist. */
export async function foldReferences(store: Store, id: string): Promise<FoldedSession | undefined> {
  const fold = new SessionFold();
  try {
    const log = await scanEventLog(store, id, (r) => fold.add(referenceView(r)));
    return { state: fold.state(), log };
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOTFOUND') return undefined;
    throw err;
  }
}

/** Bytes of the distinct artifacts the live calls of `state` reference (see {@link SessionSummary.referencedBytes}). */
export function referencedBytes(state: SessionState): number {
  const sizes = new Map<string, number>();
  for (const call of state.live) {
    const c = call.completed;
    const out = c ? parseOutputRef(c.output) : null;
    if (out?.kind === 'single') sizes.set(out.digest, out.bytes);
    if (out?.kind === 'streams') for (const st of out.streams) sizes.set(st.digest, st.bytes);
    for (const ref of [call.started?.spill, c?.spill, c?.fullText?.error, c?.fullText?.display]) {
      if (ref) sizes.set(ref.digest, ref.bytes);
    }
  }
  let total = 0;
  for (const n of sizes.values()) total += n;
  return total;
}

/** Every session with its counts, sorted by id. */
export async function listSessions(store: Store): Promise<SessionSummary[]> {
  const out: SessionSummary[] = [];
  for (const id of await listSessionIds(store)) {
    const folded = await foldReferences(store, id);
    // Deleted while we listed.
    if (!folded) continue;
    const { state, log } = folded;
    out.push({
      id,
      calls: state.live.length,
      reverted: state.calls.length - state.live.length,
      interrupted: state.live.filter((c) => !c.completed).length,
      corruptLines: log.corrupt,
      bytes: log.bytes,
      referencedBytes: referencedBytes(state),
      updatedAt: log.modifiedAt.toISOString(),
    });
  }
  return out;
}

/** What a revert did. */
export interface RevertResult {
  session: string;
  /** Ids of the calls the revert hid, in log order. */
  reverted: string[];
}

/** Reverts session `id` to before call `before` (a durable `session.revert` record); ENOTFOUND unless `before` is live in it. */
export async function revertSession(
  store: Store,
  recorder: SessionRecorder,
  id: string,
  before: string,
): Promise<RevertResult> {
  assertSessionId(id);
  const folded = await foldReferences(store, id);
  if (!folded) throw new NotFoundError(`no session ${JSON.stringify(id)} in the store`, { session: id });
  const { state } = folded;
  const at = state.live.findIndex((c) => c.callId === before);
  if (at === -1) {
    const reverted = state.calls.some((c) => c.callId === before);
    throw new NotFoundError(
      reverted
        ? `call ${JSON.stringify(before)} of session ${JSON.stringify(id)} is already reverted`
        : `session ${JSON.stringify(id)} has no call ${JSON.stringify(before)}`,
      { session: id, callId: before },
    );
  }
  await recorder.revert(id, before);
  return { session: id, reverted: state.live.slice(at).map((c) => c.callId) };
}

/** Deletes session `id` (on S3, its batch objects): its artifacts stop being roots. ENOTFOUND for no such session. */
export async function deleteSession(store: Store, id: string): Promise<void> {
  assertSessionId(id);
  const s3 = s3RecordsOf(store);
  if (s3) return deleteS3Session(store, s3, id);
  const dir = sessionDir(store.layout, id);
  const st = await fsp.stat(dir).catch(() => undefined);
  if (!st?.isDirectory()) throw new NotFoundError(`no session ${JSON.stringify(id)} in the store`, { session: id });
  try {
    await fsp.rm(dir, { recursive: true, force: true });
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  }
}
