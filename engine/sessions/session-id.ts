/** Session ids and where a session lives; an id becomes a directory name, so it is strictly `[A-Za-z0-9._-]{1,128}`, not `.` or `..`. */
import { join } from 'node:path';
import type { StoreLayout } from '../../store/layout.js';
import { BadArgumentsError } from '../protocol/errors.js';

/** Longest session id. */
export const MAX_SESSION_ID_LENGTH = 128;

const SESSION_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** Name of the event log inside a session's directory. */
export const EVENT_LOG_NAME = 'events.log';

/** True when `id` is a valid session id. */
export function isSessionId(id: unknown): id is string {
  return typeof id === 'string' && SESSION_ID.test(id) && id !== '.' && id !== '..';
}

/** Throws {@link BadArgumentsError} (EBADARGS) quoting `id` unless it is a valid session id. */
export function assertSessionId(id: unknown): asserts id is string {
  if (!isSessionId(id)) {
    const shown = typeof id === 'string' && id.length > 140 ? `${id.slice(0, 140)}...` : id;
    throw new BadArgumentsError(
      `session id ${JSON.stringify(shown)} is invalid: use 1 to ${MAX_SESSION_ID_LENGTH} characters of A-Z a-z 0-9 . _ - (not . or ..)`,
      { session: typeof id === 'string' ? id.slice(0, 200) : String(id) },
    );
  }
}

/** The directory of session `id`. */
export function sessionDir(layout: StoreLayout, id: string): string {
  return join(layout.sessions, id);
}

/** The event log of session `id`. */
export function eventLogPath(layout: StoreLayout, id: string): string {
  return join(layout.sessions, id, EVENT_LOG_NAME);
}
