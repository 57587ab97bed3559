/**
 * How a call ended, as a status: the table "Terminal status" of
 * docs/architecture.md as a pure function. A disk failure while publishing
 * is decided later, by finish.ts.
 */
import { deserializeError, type SerializedError, type SluiceError, WorkerCrashError } from '../protocol/errors.js';
import type { WireCompletion } from '../protocol/messages.js';
import type { CallStatus } from '../result.js';

/** How the worker's side of a call ended. */
export type Outcome =
  /** The tool returned: its completion (validated and bounded). */
  | { kind: 'done'; completion: WireCompletion }
  /** The tool threw, or its runtime failed the call (`cancelled` when it stopped on an abort). */
  | { kind: 'fail'; error: SerializedError; cancelled: boolean }
  /** The worker died, or ended without a completion. */
  | { kind: 'crash'; error: unknown };

/** What {@link terminalStatus} decides from. */
export interface StatusInput {
  outcome: Outcome;
  /** A failure the engine itself imposed (timeout, size limit, protocol breach, a failed recording), if any: it wins. */
  failure?: SluiceError | undefined;
  /** The stop the caller asked for (cancel, abort signal), if any. */
  cancelRequested?: SluiceError | undefined;
  /** The tool's name, for a crash's message. */
  tool: string;
}

/** The decided status of a call. */
export interface TerminalStatus {
  status: CallStatus;
  error: SluiceError | undefined;
  /** The error as the tool (or its worker) reported it: the one a cut message belongs to. */
  reportedError: SluiceError | undefined;
  /** True when `error` is one the tool finalised itself: its display and metadata stand. */
  toolsOwnError: boolean;
  /** True when the tool returned and nothing failed. */
  complete: boolean;
}

/** Decides a call's status. */
export function terminalStatus({ outcome, failure, cancelRequested, tool }: StatusInput): TerminalStatus {
  let status: CallStatus;
  let error = failure;
  let toolsOwnError = false;
  let reportedError: SluiceError | undefined;
  if (outcome.kind === 'done') {
    const completion = outcome.completion;
    if (error) status = 'failed';
    else if (cancelRequested) {
      status = 'cancelled';
      error = cancelRequested;
    } else if (completion.error) {
      status = 'failed';
      error = deserializeError(completion.error as SerializedError);
      reportedError = error;
      toolsOwnError = true;
    } else status = completion.status ?? 'success';
  } else if (outcome.kind === 'fail') {
    // The worker's serialised form, details included (toSluiceError would keep only code and message).
    const reported = deserializeError(outcome.error);
    reportedError = reported;
    if (error) status = 'failed';
    else if (outcome.cancelled || cancelRequested) {
      status = 'cancelled';
      error = cancelRequested ?? reported;
    } else {
      status = 'failed';
      error = reported;
    }
  } else if (error) {
    status = 'failed';
  } else if (cancelRequested) {
    status = 'cancelled';
    error = cancelRequested;
  } else {
    status = 'failed';
    const cause = outcome.error as { message?: string; code?: string };
    error = new WorkerCrashError(`the worker running ${tool} died: ${cause?.message ?? String(cause)}`, {
      cause: cause?.code ?? null,
    });
  }
  // A stop the engine imposed for a limit is a failure even when the tool stopped as if cancelled.
  if (error?.code === 'ETIMEOUT' || error?.code === 'ESIZELIMIT') status = 'failed';
  return { status, error, reportedError, toolsOwnError, complete: outcome.kind === 'done' && !error };
}
