/**
 * What a caller's AbortSignal says when it cancels a call: its reason is
 * kept ("cancelled by the caller: <reason>"), and a signal that timed out
 * (`AbortSignal.timeout(ms)`) fails the call with ETIMEOUT, as `timeoutMs` would.
 */
import { CancelledError, type SluiceError, TimeoutError } from '../protocol/errors.js';
import { unitPrefix } from '../protocol/text.js';

/** Longest reason text kept (a caller's reason is not the place for a whole output). */
const MAX_REASON = 1000;

function clip(text: string): string {
  return text.length <= MAX_REASON ? text : `${unitPrefix(text, MAX_REASON)}…`;
}

/** The error a call ends with when the caller's signal aborts with `reason`. */
export function callerAbortError(reason: unknown): SluiceError {
  const name = (reason as { name?: unknown } | null)?.name;
  const message = (reason as { message?: unknown } | null)?.message;
  if (name === 'TimeoutError') {
    const why = typeof message === 'string' && message !== '' ? `: ${clip(message)}` : '';
    return new TimeoutError(`the caller's signal timed out${why}`, { reason: 'signal' });
  }
  // The default reason of abort() with no argument says nothing the caller did not know.
  if (reason === undefined || name === 'AbortError') return new CancelledError('cancelled by the caller');
  const text = typeof message === 'string' ? message : typeof reason === 'string' ? reason : String(reason);
  if (text === '') return new CancelledError('cancelled by the caller');
  return new CancelledError(`cancelled by the caller: ${clip(text)}`);
}
