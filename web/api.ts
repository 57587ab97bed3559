/**
 * The page's only way to the server: the public HTTP API (docs/http.md) with
 * the bearer token in the Authorization header. The token lives in memory
 * and in session storage (this tab only), never in a URL the server sees and
 * never in a cookie; a 401 forgets it and brings the prompt back.
 * Server-sent events are read through fetch streaming, since EventSource
 * cannot send headers.
 */

const STORAGE_KEY = 'sluice.token';

let token: string | undefined;
const unauthorizedListeners = new Set<() => void>();

/** The API refused the token (401). */
export class Unauthorized extends Error {
  constructor() {
    super('the server refused the token');
  }
}

/** An error response of the API: its status and stable code. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The token to use from now on (kept in this tab's session storage), or none. */
export function setToken(value: string | undefined): void {
  token = value;
  try {
    if (value === undefined) sessionStorage.removeItem(STORAGE_KEY);
    else sessionStorage.setItem(STORAGE_KEY, value);
  } catch {
    // Storage may be disabled: the token then lives in memory only.
  }
}

/** The token in memory or session storage. */
export function storedToken(): string | undefined {
  if (token !== undefined) return token;
  try {
    return sessionStorage.getItem(STORAGE_KEY) ?? undefined;
  } catch {
    return undefined;
  }
}

/** Calls `fn` whenever the server answers 401. */
export function onUnauthorized(fn: () => void): void {
  unauthorizedListeners.add(fn);
}

/** A request to the API with the token; 401 and error bodies become exceptions. */
export async function request(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set('authorization', `Bearer ${token ?? ''}`);
  const res = await fetch(path, {
    ...init,
    headers,
    credentials: 'omit',
    cache: 'no-store',
    referrerPolicy: 'no-referrer',
  });
  if (res.status === 401) {
    setToken(undefined);
    for (const fn of unauthorizedListeners) fn();
    throw new Unauthorized();
  }
  if (!res.ok) {
    let code = `HTTP${res.status}`;
    let message = res.statusText;
    try {
      const body = (await res.json()) as { error?: { code?: string; message?: string } };
      code = body.error?.code ?? code;
      message = body.error?.message ?? message;
    } catch {
      // Not a JSON error body.
    }
    throw new ApiError(res.status, code, message);
  }
  return res;
}

/** GET `path` as JSON. */
export async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  const res = await request(path, signal ? { signal } : {});
  return (await res.json()) as T;
}

/** POST `body` as JSON to `path`, the answer as JSON. */
export async function postJson<T>(path: string, body: unknown): Promise<T> {
  const res = await request(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return (await res.json()) as T;
}

/** One server-sent event. */
export interface SseEvent {
  event: string;
  data: string;
  id: string | undefined;
}

/**
 * Reads the event stream at `path` until it ends, `signal` aborts or it
 * fails; `onOpen` runs once the response has started (the subscription
 * exists on the server from then on). Resolves when the stream ended.
 */
export async function readEvents(
  path: string,
  onEvent: (e: SseEvent) => void,
  signal: AbortSignal,
  onOpen?: () => void,
): Promise<void> {
  const res = await request(path, { headers: { accept: 'text/event-stream' }, signal });
  onOpen?.();
  if (res.status === 204 || !res.body) return;
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let cut = buffer.indexOf('\n\n');
      while (cut >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const parsed = parseFrame(frame);
        if (parsed) onEvent(parsed);
        cut = buffer.indexOf('\n\n');
      }
    }
  } finally {
    reader.releaseLock();
  }
}

/** One frame's fields; undefined for comments and `retry:` alone. */
function parseFrame(frame: string): SseEvent | undefined {
  let event = 'message';
  const data: string[] = [];
  let id: string | undefined;
  for (const line of frame.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
    else if (field === 'id') id = value;
  }
  return data.length > 0 ? { event, data: data.join('\n'), id } : undefined;
}
