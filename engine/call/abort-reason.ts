/**
 * What a caller's AbortSignal says when it cancels a call. The reason is
 * kept: `ac.abort(new Error('user abort'))` ends the call cancelled with
 * "cancelled by the caller: user abort"; a signal that timed out
 * (`AbortSignal.timeout(ms)`, whose reason is a DOMException named
 * TimeoutError) fails it with ETIMEOUT, as the call's own `timeoutMs`
 * would; a plain `ac.abort()` (an AbortError) is "cancelled by the caller".
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
