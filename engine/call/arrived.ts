/**
 * What arrives from a worker at a call's end, held to the engine's bounds.
 * The worker runtime bounds first (workers/bounds.ts); these checks keep the
 * engine from holding more even when a worker did not.
 */
import {
  makeError,
  ProtocolError,
  ResourceLimitError,
  type SerializedError,
  type SluiceError,
  serializeError,
} from '../protocol/errors.js';
import { COMPLETION_BOUNDS } from '../protocol/limits.js';
import type { WireCompletion } from '../protocol/messages.js';
import { cutMarker, cutMarkerBytes, detachString, utf8PrefixEnd } from '../protocol/text.js';
import type { TextRef } from '../result.js';

/**
 * An error as it arrived, held to the worker runtime's bounds: a message
 * past its bound is cut with a marker, details past theirs are replaced, and
 * a shape that is not an error at all is a protocol error.
 */
export function boundArrivedError(e: SerializedError): SerializedError {
  if (typeof e?.message !== 'string' || typeof e.code !== 'string') {
    return serializeError(new ProtocolError('a worker reported an error without a code and a message'));
  }
  const max = COMPLETION_BOUNDS.errorMessageBytes;
  let message = e.message;
  if (Buffer.byteLength(message, 'utf8') > max) {
    const full = Buffer.byteLength(message, 'utf8');
    const { end, bytes } = utf8PrefixEnd(message, max - cutMarkerBytes(full));
    message = `${detachString(message.slice(0, end))}${cutMarker(full - bytes)}`;
  }
  let details = e.details;
  if (details !== undefined) {
    let json: string | undefined;
    try {
      json = JSON.stringify(details);
    } catch {
      json = undefined;
    }
    if (json === undefined || Buffer.byteLength(json, 'utf8') > COMPLETION_BOUNDS.errorDetailsBytes) {
      details = {
        cut:
          json === undefined
            ? 'details were not JSON'
            : `details over ${COMPLETION_BOUNDS.errorDetailsBytes} bytes of JSON were dropped`,
      };
    }
  }
  if (message === e.message && details === e.details) return e;
  return details === undefined ? { code: e.code, message } : { code: e.code, message, details };
}

/** The resource-limit error of a completion whose terminal fields pass their bounds, if any. */
export function oversizedCompletion(c: WireCompletion): ResourceLimitError | undefined {
  const b = COMPLETION_BOUNDS;
  if ((c.messages?.length ?? 0) > b.messages || (c.attachments?.length ?? 0) > b.attachments) {
    return new ResourceLimitError(
      `the completion has ${c.messages?.length ?? 0} messages and ${c.attachments?.length ?? 0} attachments; at most ${b.messages} and ${b.attachments}`,
    );
  }
  const fields = Buffer.byteLength(JSON.stringify({ m: c.metadata ?? null, e: c.messages ?? null }));
  if (fields > b.fieldsBytes) {
    return new ResourceLimitError(
      `the completion's metadata and messages take ${fields} bytes, more than ${b.fieldsBytes}`,
    );
  }
  let attached = 0;
  for (const a of c.attachments ?? []) attached += a.data.length;
  if (attached > b.attachmentsBytes) {
    return new ResourceLimitError(
      `the completion's attachments take ${attached} bytes, more than ${b.attachmentsBytes}`,
    );
  }
  return undefined;
}

/** `text` (cut by the worker from a whole of `fullBytes`) with a marker saying how much was cut and where the whole is. */
export function textWithCutMarker(text: string, fullBytes: number | undefined, whole: TextRef | undefined): string {
  if (fullBytes === undefined) return text;
  const cut = fullBytes - Buffer.byteLength(text, 'utf8');
  if (cut <= 0) return text;
  return `${text}${cutMarker(cut, whole?.digest)}`;
}

/** The error with the cut marker on its message (see {@link textWithCutMarker}). */
export function withCutMarker(
  error: SluiceError,
  fullBytes: number | undefined,
  whole: TextRef | undefined,
): SluiceError {
  const message = textWithCutMarker(error.message, fullBytes, whole);
  return message === error.message ? error : makeError(error.code, message, error.details);
}
