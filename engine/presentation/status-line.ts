/** The line ending the model view of a call that did not succeed, clipped to stay inside MODEL_STATUS_RESERVE. */
import type { SluiceError } from '../protocol/errors.js';
import { clipUtf8 } from '../protocol/text.js';
import type { CallStatus, TextRef } from '../result.js';

/** UTF-8 bytes of the status line's detail: the line, with its wrapper, stays inside MODEL_STATUS_RESERVE. */
export const STATUS_DETAIL_MAX_BYTES = 700;

/** What a status line says. */
export interface StatusFacts {
  status: CallStatus;
  complete: boolean;
  /** The result's error, if any. */
  error?: SluiceError | undefined;
  /** The tool's own note on a failure without an error (bash: `exit code 3`). */
  note?: string | undefined;
  /** Where the whole error message is, when the worker cut it. */
  wholeError?: TextRef | undefined;
}

/** The status line of a result, or undefined for a success (it has none). */
export function statusLine({ status, complete, error, note, wholeError }: StatusFacts): string | undefined {
  if (status === 'success') return undefined;
  const raw = error ? `${error.code}: ${error.message}` : (note ?? 'the tool reported failure');
  // The whole error's address survives the clipping: it comes after the clipped detail.
  const whole = wholeError ? ` The whole error: read(filePath="artifact://${wholeError.digest}")` : '';
  const detail = clipUtf8(raw.replace(/\s+/g, ' '), STATUS_DETAIL_MAX_BYTES - Buffer.byteLength(whole)) + whole;
  const incomplete = complete ? '' : ' Output is incomplete.';
  return `[Status: ${status}. ${detail}.${incomplete}]`;
}

/** `model` with the status line of `facts` after it (a blank line between), unchanged for a success. */
export function withStatusLine(model: string, facts: StatusFacts): string {
  const line = statusLine(facts);
  if (line === undefined) return model;
  if (model.length === 0) return line;
  return model.endsWith('\n') ? `${model}\n${line}` : `${model}\n\n${line}`;
}
