/**
 * The bound on the calls the page holds (web/calls-model.ts), apart so it
 * can be tested without a DOM.
 */
import type { CallSummary } from './types.js';

/**
 * The most calls the page holds: past it, the oldest ended ones are
 * forgotten (a harness running for days must not grow the page without
 * bound; the server keeps fewer than this, and recorded calls stay
 * reachable under Sessions).
 */
export const MAX_CALLS_HELD = 10_000;

/** Bytes captured by call `c` (progress while running, its output once ended). */
export function bytesOf(c: CallSummary): number {
  let n = 0;
  for (const s of c.streams) n += s.bytes;
  return n;
}

/**
 * Forgets the oldest ended calls of `calls` (insertion order) until at most
 * `max` are held; running ones stay. Returns the bytes of those forgotten.
 */
export function forgetOldest(calls: Map<string, CallSummary>, max: number): number {
  let bytes = 0;
  for (const [id, c] of calls) {
    if (calls.size <= max) break;
    if (c.status === 'running') continue;
    bytes += bytesOf(c);
    calls.delete(id);
  }
  return bytes;
}
