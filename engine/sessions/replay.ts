/**
 * Replay: a session's calls rebuilt from its event log, without running any
 * tool and without writing anything to the store.
 *
 * Each surviving (not reverted) call comes back as the {@link TerminalResult}
 * the live call returned: `display` is the final display only (live display
 * deltas are never stored, so they cannot be shown twice) and `model` is the
 * exact model view, both byte-identical to the live result. Artifacts are not
 * read, so a session whose artifacts were deleted still replays; reading them
 * afterwards fails with ENOTFOUND.
 *
 * A call with a `call.started` record and no `call.completed` record (the
 * process died mid-call, or the call is still running in another process)
 * replays as interrupted: status `failed`, `complete: false`, no output, an
 * EWORKERCRASH error with `details.interrupted: true`, and a display and
 * model status line that say so.
 */
import type { Store } from '../../store/store.js';
import { formatDuration } from '../presentation/display.js';
import { type ErrorCode, type SerializedError, serializeError, WorkerCrashError } from '../protocol/errors.js';
import type { TerminalResult } from '../result.js';
import { eventLogRecords, scanEventLog } from './log-reader.js';
import {
  CALL_COMPLETED,
  CALL_STARTED,
  type CompletedRecord,
  parseOutputRef,
  validAttachments,
  validMessages,
} from './records.js';
import { loadSpill } from './spill.js';
import { type CallEntry, referenceView, SessionFold } from './state.js';

/** One call as replayed. */
export interface ReplayedCall {
  callId: string;
  tool: string;
  /** The call's arguments; undefined when the log does not have them. */
  args: unknown;
  /** The terminal result: `display` and `model` exactly as the live call returned them. */
  result: TerminalResult;
  /** True when the log has no terminal record for the call. */
  interrupted: boolean;
  /** Spilled fields that could not be loaded (their blob is missing or corrupt); they hold defaults. */
  unavailable?: string[];
}

/** A replayed session. */
export interface ReplayedSession {
  session: string;
  /** Surviving calls, in log order. */
  calls: ReplayedCall[];
  /** Calls hidden by reverts. */
  reverted: number;
  /** Log lines skipped as torn or corrupt. */
  corruptLines: number;
  /** Intact lines skipped because this version does not know or cannot use them. */
  skippedLines: number;
}

/** Text of an interrupted call's final display. */
export function interruptedDisplay(tool: string): string {
  return `${tool} was interrupted: the process running it ended before the call finished, so no result was recorded`;
}

const INTERRUPTED_MESSAGE = 'the process running the call ended before it finished; no output was recorded';

/**
 * A replay whose calls are rebuilt one at a time, as they are iterated, in
 * bounded memory: the log is read twice, first keeping only each call's id
 * (to apply reverts and count), then record by record as the iteration pulls,
 * holding only the calls whose records are still incomplete (calls that ran
 * at the same time) and one call's spilled fields at a time.
 */
export interface SessionReplay extends Omit<ReplayedSession, 'calls'> {
  /** Surviving calls in log order, each rebuilt when the iteration reaches it. */
  calls(): AsyncGenerator<ReplayedCall, void, undefined>;
}

/**
 * Reads session `id` of `store` once to fold it; its calls are rebuilt when
 * `calls()` is iterated, from the same bytes of the log (records appended in
 * between are not part of this replay).
 *
 * @throws BadArgumentsError (EBADARGS) for an invalid id; NotFoundError (ENOTFOUND) when there is no such session.
 */
export async function openReplay(store: Store, id: string): Promise<SessionReplay> {
  const fold = new SessionFold();
  const log = await scanEventLog(store, id, (r) => fold.add(referenceView(r)));
  const state = fold.state();
  // What each surviving call's records are, so the second pass knows when a call is whole.
  const order = state.live.map((e) => ({
    callId: e.callId,
    started: e.started !== undefined,
    completed: e.completed !== undefined,
  }));
  return {
    session: id,
    reverted: state.calls.length - state.live.length,
    corruptLines: log.corrupt,
    skippedLines: log.unknown + log.invalid,
    async *calls() {
      const position = new Map(order.map((o, i) => [o.callId, i]));
      const pending = new Map<number, CallEntry>();
      let next = 0;
      const whole = (i: number): CallEntry | undefined => {
        const e = pending.get(i);
        const want = order[i];
        if (!e || !want) return undefined;
        return (!want.started || e.started) && (!want.completed || e.completed) ? e : undefined;
      };
      for await (const records of eventLogRecords(store, id, log.bytes)) {
        for (const r of records) {
          if (r.type !== CALL_STARTED && r.type !== CALL_COMPLETED) continue;
          const i = position.get(r.callId);
          if (i === undefined || i < next) continue;
          let e = pending.get(i);
          if (!e) {
            e = { callId: r.callId, reverted: false };
            pending.set(i, e);
          }
          // The first record of each kind counts, as in the fold.
          if (r.type === CALL_STARTED) e.started ??= r;
          else e.completed ??= r;
        }
        for (let e = whole(next); e !== undefined; e = whole(next)) {
          pending.delete(next++);
          yield await replayCall(store, id, e);
        }
      }
      // Only if the log lost bytes between the two reads: what is left, as far as it goes.
      for (; next < order.length; next++) {
        const e = pending.get(next);
        if (e) yield await replayCall(store, id, e);
      }
    },
  };
}

/**
 * Replays session `id` of `store`, every call in one object (see
 * {@link openReplay} for one call at a time).
 *
 * @throws BadArgumentsError (EBADARGS) for an invalid id; NotFoundError (ENOTFOUND) when there is no such session.
 */
export async function replaySession(store: Store, id: string): Promise<ReplayedSession> {
  const { calls: each, ...summary } = await openReplay(store, id);
  const calls: ReplayedCall[] = [];
  for await (const c of each()) calls.push(c);
  return {
    session: summary.session,
    calls,
    reverted: summary.reverted,
    corruptLines: summary.corruptLines,
    skippedLines: summary.skippedLines,
  };
}

async function replayCall(store: Store, session: string, e: CallEntry): Promise<ReplayedCall> {
  const unavailable: string[] = [];
  const started = e.started ? await withSpill(store, e.started, unavailable) : undefined;
  const tool = e.completed?.tool ?? e.started?.tool ?? 'unknown';
  const args = started?.args;
  if (!e.completed) {
    const error = serializeError(new WorkerCrashError(INTERRUPTED_MESSAGE, { interrupted: true }));
    const result: TerminalResult = {
      callId: e.callId,
      tool,
      session,
      status: 'failed',
      complete: false,
      display: interruptedDisplay(tool),
      model: `[Status: failed. ${error.code}: ${error.message}. Output is incomplete.]`,
      output: null,
      metadata: {},
      attachments: [],
      messages: [],
      error,
      startedAt: e.started?.at ?? '',
      durationMs: 0,
    };
    return done({ callId: e.callId, tool, args, result, interrupted: true }, unavailable);
  }
  const c = await withSpill(store, e.completed, unavailable);
  const result: TerminalResult = {
    callId: e.callId,
    tool,
    session,
    status: c.status,
    // Older layouts without the flag: only a success was complete.
    complete: c.complete ?? c.status === 'success',
    display: typeof c.display === 'string' ? c.display : defaultDisplay(tool, c),
    model: typeof c.model === 'string' ? c.model : '',
    output: parseOutputRef(c.output),
    metadata: isPlainObject(c.metadata) ? c.metadata : {},
    attachments: validAttachments(Array.isArray(c.attachments) ? c.attachments : undefined),
    messages: validMessages(Array.isArray(c.messages) ? c.messages : undefined),
    startedAt: c.startedAt ?? e.started?.at ?? '',
    durationMs: c.durationMs ?? 0,
  };
  const err = c.error as SerializedError | { code: string; message: string } | undefined;
  if (err && typeof err.code === 'string' && typeof err.message === 'string') {
    result.error = err as SerializedError & { code: ErrorCode };
  }
  return done({ callId: e.callId, tool, args, result, interrupted: false }, unavailable);
}

function done(call: ReplayedCall, unavailable: string[]): ReplayedCall {
  if (unavailable.length > 0) call.unavailable = unavailable;
  return call;
}

function defaultDisplay(tool: string, c: CompletedRecord): string {
  return `${tool} ${c.status}${c.durationMs !== undefined ? ` in ${formatDuration(c.durationMs)}` : ''}`;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** The record with its spilled fields put back (read-only); fields whose blob is unreadable are listed in `unavailable`. */
async function withSpill<T extends { spill?: { digest: string; bytes: number; fields: string[] } }>(
  store: Store,
  rec: T,
  unavailable: string[],
): Promise<T> {
  if (!rec.spill) return rec;
  try {
    const fields = await loadSpill(store, rec.spill);
    const back: Record<string, unknown> = { ...rec };
    for (const f of rec.spill.fields) if (Object.hasOwn(fields, f)) back[f] = fields[f];
    return back as T;
  } catch {
    unavailable.push(...rec.spill.fields);
    return rec;
  }
}
