/**
 * Expiry of the objects that stand for a live holder on S3 (a lease, the GC
 * lock), judged on the SERVER's clock only: the object's `LastModified`
 * against the `Date` of a reply received after it was read. Neither is this
 * host's clock, so a host whose clock is wrong or stepped cannot make a live
 * holder look dead, nor a dead one live. Both have one-second resolution,
 * hence the extra second.
 *
 * Each such object states its own TTL (`ttl <ms>` in its body), so hosts
 * with other settings judge each other by the holder's promise.
 */

import { randomBytes } from 'node:crypto';

/** Both clocks the comparison uses tick in whole seconds. */
const RESOLUTION_MS = 1000;

/**
 * True when an object last written at `lastModified` (server clock) with a
 * promise to be renewed within `ttlMs` is past it at `serverNow` (server
 * clock). Unknown times are never expired: what cannot be judged is kept.
 */
export function expiredOnServer(lastModified: Date | undefined, serverNow: Date | undefined, ttlMs: number): boolean {
  if (!lastModified || !serverNow || !Number.isFinite(ttlMs)) return false;
  return serverNow.getTime() - lastModified.getTime() >= ttlMs + RESOLUTION_MS;
}

/**
 * True when an object last written at `lastModified` is younger than
 * `graceMs` at `serverNow` (both server clock), judged on the safe side:
 * both times are truncated to their second, so the true age may be up to
 * a second less than their difference, and that second is granted. An
 * unknown age is young; a grace period of 0 keeps nothing young.
 */
export function youngOnServer(lastModified: Date | undefined, serverNow: Date | undefined, graceMs: number): boolean {
  if (graceMs <= 0) return false;
  if (!lastModified || !serverNow) return true;
  return serverNow.getTime() - lastModified.getTime() < graceMs + RESOLUTION_MS;
}

/** A random suffix making every write of a holder object a new ETag (S3's ETag is the MD5 of the body). */
export function writeNonce(): string {
  return randomBytes(8).toString('hex');
}

/** The `key value` header lines of a holder object's body, up to the first blank line. */
export function parseHeader(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') break;
    const at = line.indexOf(' ');
    if (at > 0) out.set(line.slice(0, at), line.slice(at + 1));
  }
  return out;
}
