/**
 * Replay: a session's calls rebuilt from its log without running or writing
 * anything, `display` and `model` byte-identical to the live results; a call
 * with no terminal record comes back interrupted.
 */
import type { Store } from '../../store/store.js';
import { formatDuration } from '../presentation/display.js';
import { type ErrorCode, type SerializedError, serializeError, WorkerCrashError } from '../protocol/errors.js';
import type { TerminalResult } from '../result.js';
import { type LinePlace, openEventLog, readEventLog, scanOpenLog } from './log-reader.js';
import {
  CALL_COMPLETED,
  CALL_STARTED,
  type CompletedRecord,
  parseOutputRef,
  type SessionRecord,
  type StartedRecord,
  validAttachments,
  validMessages,
} from './records.js';
import { loadSpill } from './spill.js';
import { type CallEntry, foldSession, SessionFold } from './state.js';

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

/** A replay rebuilding one call at a time as it is iterated, in memory that does not grow with the session; end it, or {@link close} it. */
export interface SessionReplay extends Omit<ReplayedSession, 'calls'> {
  /** Surviving calls in log order, each rebuilt when the iteration reaches it (once). */
  calls(): AsyncGenerator<ReplayedCall, void, undefined>;
  /** Closes the log without iterating (idempotent; the end of the iteration closes it too). */
  close(): Promise<void>;
}

/**
 * Reads session `id` once to fold it; its calls are rebuilt from the same
 * open file when `calls()` is iterated (a session changed meanwhile replays
 * as it was). EBADARGS for an invalid id, ENOTFOUND for no such session.
 */
export async function openReplay(store: Store, id: string): Promise<SessionReplay> {
  const log = await openEventLog(store, id);
  const fold = new SessionFold();
  const places = new Map<string, { started?: LinePlace; completed?: LinePlace }>();
  let counts: Awaited<ReturnType<typeof scanOpenLog>>;
  try {
    counts = await scanOpenLog(log, (r, place) => {
      if (r.type === CALL_STARTED || r.type === CALL_COMPLETED) {
        // The fold needs only the id; where the record is lets the call be read back later.
        fold.add({ type: r.type, callId: r.callId } as SessionRecord);
        const at = places.get(r.callId) ?? {};
        if (r.type === CALL_STARTED) at.started ??= place;
        else at.completed ??= place;
        places.set(r.callId, at);
      } else {
        fold.add(r);
      }
    });
  } catch (err) {
    await log.close();
    throw err;
  }
  const state = fold.state();
  const live = state.live.map((e) => ({ callId: e.callId, ...places.get(e.callId) }));
  places.clear();
  let iterated = false;
  return {
    session: id,
    reverted: state.calls.length - state.live.length,
    corruptLines: counts.corrupt,
    skippedLines: counts.unknown + counts.invalid,
    close: () => log.close(),
    async *calls() {
      if (iterated) throw new Error('a replay can be iterated once');
      iterated = true;
      try {
        for (const at of live) {
          const e: CallEntry = { callId: at.callId, reverted: false };
          if (at.started) e.started = (await log.recordAt(at.started)) as StartedRecord | undefined;
          if (at.completed) e.completed = (await log.recordAt(at.completed)) as CompletedRecord | undefined;
          yield await replayCall(store, id, e);
        }
      } finally {
        await log.close();
      }
    },
  };
}

/** Replays session `id`, every call in one object, from one read of the log. EBADARGS for an invalid id, ENOTFOUND for no such session. */
export async function replaySession(store: Store, id: string): Promise<ReplayedSession> {
  const log = await readEventLog(store, id);
  const state = foldSession(log.records);
  const calls: ReplayedCall[] = [];
  for (const e of state.live) calls.push(await replayCall(store, id, e));
  return {
    session: id,
    calls,
    reverted: state.calls.length - state.live.length,
    corruptLines: log.corrupt,
    skippedLines: log.unknown + log.invalid,
  };
}

/** Rebuilds one call from its records (its spilled fields read back). @internal */
export async function replayCall(store: Store, session: string, e: CallEntry): Promise<ReplayedCall> {
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
      ...(e.started?.sandbox ? { sandbox: e.started.sandbox } : {}),
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
    // A record without the flag is complete only on success.
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
  const sandbox = c.sandbox ?? e.started?.sandbox;
  if (sandbox) result.sandbox = sandbox;
  const err = c.error as SerializedError | { code: string; message: string } | undefined;
  if (err && typeof err.code === 'string' && typeof err.message === 'string') {
    result.error = err as SerializedError & { code: ErrorCode };
  }
  if (c.fullText && (c.fullText.error || c.fullText.display)) {
    result.fullText = {
      ...(c.fullText.error ? { error: c.fullText.error } : {}),
      ...(c.fullText.display ? { display: c.fullText.display } : {}),
    };
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
