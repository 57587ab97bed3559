/**
 * HTTP plumbing of the server: error codes to statuses, JSON responses,
 * size-bounded JSON request bodies validated with zod.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  BadArgumentsError,
  type ErrorCode,
  ResourceLimitError,
  type SluiceError,
  toSluiceError,
} from '../engine/protocol/errors.js';
import { firstIssue } from '../engine/protocol/issues.js';
import type { z } from '../engine/protocol/zod.js';
import { writeJsonWithArray } from './json-stream.js';

/**
 * The HTTP status of each error code. A `Record` over every code, so adding
 * a code fails the build until it has a status here (and in docs/http.md).
 */
export const HTTP_STATUS: Readonly<Record<ErrorCode, number>> = {
  EBADURI: 400,
  EBADARGS: 400,
  EBADOPTION: 400,
  ENOTMANIFEST: 400,
  EUNKNOWNTOOL: 400,
  EDENIED: 403,
  ENOTFOUND: 404,
  EUNKNOWNSTREAM: 404,
  ERESOURCELIMIT: 413,
  ESIZELIMIT: 413,
  EBINARY: 415,
  ECANCELLED: 503,
  ECLOSED: 503,
  ETIMEOUT: 504,
  EINTEGRITY: 500,
  EDIGESTMISMATCH: 500,
  EDISK: 500,
  EWORKERCRASH: 500,
  ETOOLFAILED: 500,
  EPROTOCOL: 500,
  EBADDECL: 500,
  EBADMODULE: 500,
  EUNDECLAREDSTREAM: 500,
  EMIXEDMODE: 500,
  EBADOUTPUT: 500,
  ECONTEXTLENGTH: 500,
  EFITREJECTED: 500,
  EBADMETHOD: 405,
  EMISSINGDEP: 500,
  EUNSUPPORTED: 500,
  ELIMIT: 500,
  EQUEUEFULL: 503,
};

/** An error with the HTTP status to answer it with (when not the code's usual one) and extra headers. */
export class HttpError extends Error {
  constructor(
    readonly error: SluiceError,
    readonly status: number = HTTP_STATUS[error.code],
    readonly headers: Record<string, string> = {},
  ) {
    super(error.message);
  }
}

/** Sends `body` as JSON with `status`. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string | number> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

/**
 * Sends `{ ...fields, [key]: [...items] }` as a chunked body one item at a
 * time, waiting for the client to drain, so an answer larger than memory
 * never exists as one string; an error after the head destroys the response.
 */
export async function sendJsonArrayStream(
  res: ServerResponse,
  status: number,
  fields: Record<string, unknown>,
  key: string,
  items: AsyncIterable<unknown>,
): Promise<void> {
  // The client may have gone while the answer was being prepared: then there is no one to send it to.
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  // A client that goes away stops the iteration: nothing more is rebuilt for no one.
  if (await writeJsonWithArray((text) => writeWithBackpressure(res, text), fields, key, items)) res.end();
}

/**
 * Writes `text`, resolving true once the response can take more, false when
 * the client is gone. Waits for 'drain' when the socket is backed up, so what
 * a slow client has not read stays with its producer, not in memory here.
 */
export function writeWithBackpressure(res: ServerResponse, text: string): Promise<boolean> {
  // A closed response never drains, and its 'close' has already been emitted.
  if (res.destroyed || res.writableEnded) return Promise.resolve(false);
  if (res.write(text)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const settle = (ok: boolean) => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(ok);
    };
    const onDrain = () => settle(true);
    const onClose = () => settle(false);
    res.on('drain', onDrain);
    res.on('close', onClose);
  });
}

/** Sends `{ error: { code, message } }` with the status of the error (or of an {@link HttpError}). */
export function sendError(res: ServerResponse, err: unknown): void {
  const http = err instanceof HttpError ? err : undefined;
  const e = http?.error ?? toSluiceError(err, 'EPROTOCOL');
  const status = http?.status ?? HTTP_STATUS[e.code];
  if (res.headersSent) {
    // Mid-stream (an event stream): nothing valid can be sent any more.
    res.destroy();
    return;
  }
  sendJson(res, status, { error: { code: e.code, message: e.message } }, http?.headers ?? {});
}

/** An {@link HttpError} for a body over the limit: 413, and the connection closes (the rest is not read). */
function tooLarge(limit: number): HttpError {
  return new HttpError(new ResourceLimitError(`request body is larger than ${limit} bytes`, { limit }), 413, {
    connection: 'close',
  });
}

/** Reads a JSON body of at most `limit` bytes: 413 past it (without reading further), 415 when not JSON, 400 when malformed; empty reads as `empty`. */
export async function readJsonBody(req: IncomingMessage, limit: number, empty: unknown = undefined): Promise<unknown> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) throw tooLarge(limit);
  const hasBody = (declared !== undefined && Number(declared) > 0) || req.headers['transfer-encoding'] !== undefined;
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (hasBody && type !== 'application/json') {
    throw new HttpError(
      new BadArgumentsError(`request body must be application/json, got ${JSON.stringify(type || '(none)')}`),
      415,
      { connection: 'close' },
    );
  }
  const { chunks, size } = await collect(req, limit);
  if (size === 0) {
    if (empty !== undefined) return empty;
    throw new HttpError(new BadArgumentsError('the request needs a JSON body'));
  }
  try {
    return JSON.parse(Buffer.concat(chunks, size).toString('utf8'));
  } catch (err) {
    throw new HttpError(new BadArgumentsError(`request body is not valid JSON: ${(err as Error).message}`));
  }
}

/**
 * The body's chunks, at most `limit` bytes. Past the limit it stops reading
 * (without destroying the request, so the 413 can still be sent) and rejects.
 */
function collect(req: IncomingMessage, limit: number): Promise<{ chunks: Buffer[]; size: number }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.pause();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve({ chunks, size });
    };
    const onError = (err: Error) => {
      cleanup();
      reject(new HttpError(new BadArgumentsError(`request body could not be read: ${err.message}`)));
    };
    const onClose = () => {
      cleanup();
      reject(new HttpError(new BadArgumentsError('the client went away while sending the body')));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/** `value` validated by `schema`, or a 400 EBADARGS naming the first bad field and quoting its value. */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const i = firstIssue(r.error, value);
  const quoted = i.got === 'missing' ? '' : ` (${i.got})`;
  throw new HttpError(
    new BadArgumentsError(`${what}${i.path ? ` field ${i.path}` : ''}: ${i.message}${quoted}`, { field: i.path }),
  );
}
