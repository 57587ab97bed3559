/**
 * The web view's static files (docs/web.md), served at `/` without the
 * token: they hold no data, only the page that asks for the token and then
 * reads everything through the API with it. Built from web/ into dist/web/
 * at package time (`npm run build`), read once, and sent with headers that
 * keep tool output from ever running as code: a Content-Security-Policy with
 * no inline script, no eval, Trusted Types required (so no string can reach
 * innerHTML), same-origin connections only and no framing; nosniff; no
 * referrer.
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { packageRoot } from '../engine/package-root.js';

/** The Content-Security-Policy of every static file. */
export const WEB_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

/** Headers of every static file. */
export const WEB_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': WEB_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-cache',
};

/** URL path → file in dist/web/ and its media type. */
const FILES: Readonly<Record<string, { file: string; type: string }>> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/web/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  '/web/app.css': { file: 'app.css', type: 'text/css; charset=utf-8' },
  '/web/icon.svg': { file: 'icon.svg', type: 'image/svg+xml' },
};

const loaded = new Map<string, Buffer | null>();

/** A built file from the package's dist/web/, read once. */
function load(file: string): Buffer | null {
  if (loaded.has(file)) return loaded.get(file) ?? null;
  let found: Buffer | null = null;
  try {
    // Built into dist/web/ whether the server runs from dist/ or (tests) from sources.
    found = readFileSync(join(packageRoot(), 'dist', 'web', file));
  } catch {
    // Not built: the route answers 404.
  }
  loaded.set(file, found);
  return found;
}

/** True when `pathname` is one of the web view's files (served without the token). */
export function isWebPath(method: string, pathname: string): boolean {
  return (method === 'GET' || method === 'HEAD') && Object.hasOwn(FILES, pathname);
}

/** Sends the web view's file for `pathname` (see {@link isWebPath}); 404 when the view was not built. */
export function serveWeb(req: IncomingMessage, res: ServerResponse, pathname: string): void {
  const entry = FILES[pathname];
  const body = entry ? load(entry.file) : null;
  if (!entry || !body) {
    const text = 'the web view is not built (npm run build)\n';
    res.writeHead(404, { ...WEB_HEADERS, 'content-type': 'text/plain; charset=utf-8', 'content-length': text.length });
    res.end(req.method === 'HEAD' ? undefined : text);
    return;
  }
  res.writeHead(200, { ...WEB_HEADERS, 'content-type': entry.type, 'content-length': body.length });
  res.end(req.method === 'HEAD' ? undefined : body);
}
