/**
 * Query strings and request signals shared by the route handlers: a
 * repeated or unknown parameter is a 400, counts are decimal digits, flags
 * are `true` or `false`.
 */
import type { ServerResponse } from 'node:http';
import { BadArgumentsError } from '../engine/protocol/errors.js';
import { HttpError } from './http.js';

/** The query of `url` as an object; a repeated parameter is a 400. */
export function queryObject(url: URL): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of url.searchParams) {
    if (Object.hasOwn(out, k)) throw new HttpError(new BadArgumentsError(`query parameter ${k} is repeated`));
    out[k] = v;
  }
  return out;
}

/** A signal aborted when the client goes away before the response is sent. */
export function clientGone(res: ServerResponse): AbortSignal {
  const gone = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  return gone.signal;
}

/** A signal aborted when the server shuts down or the client goes away before the response is sent. */
export function requestSignal(ctx: { shutdown: AbortSignal }, res: ServerResponse): AbortSignal {
  return AbortSignal.any([ctx.shutdown, clientGone(res)]);
}

/** A decimal count from a header or query value, or a 400. */
export function parseCount(what: string, value: string | undefined, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (value === undefined) return undefined;
  const n = /^[0-9]{1,16}$/.test(value) ? Number(value) : Number.NaN;
  if (!(n <= max)) {
    throw new HttpError(
      new BadArgumentsError(`${what} must be an integer from 0 to ${max}, got ${JSON.stringify(value)}`),
    );
  }
  return n;
}

/** A `true`/`false` query value (absent: false), or a 400. */
export function parseFlag(what: string, value: string | undefined): boolean {
  if (value === undefined || value === 'false') return false;
  if (value === 'true') return true;
  throw new HttpError(new BadArgumentsError(`${what} must be true or false, got ${JSON.stringify(value)}`));
}

export function onlyParams(url: URL, allowed: string[], what: string): Record<string, string> {
  const q = queryObject(url);
  for (const k of Object.keys(q)) {
    if (!allowed.includes(k)) {
      throw new HttpError(new BadArgumentsError(`${what} takes no query parameter ${JSON.stringify(k)}`));
    }
  }
  return q;
}
