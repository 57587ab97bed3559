/**
 * The data plane's size limits (see messages.ts). Kept apart from the message
 * schemas so a worker can use them without building those schemas: zod
 * schema construction costs a starting worker about 10 ms, before its first
 * call can run.
 */

/**
 * Largest chunk on the wire; larger writes are split at code point boundaries.
 * A worker sends writes that queued up behind a credit wait as one message,
 * up to a quarter of its call's window (capped here): fewer, larger messages
 * cost both threads less (docs/benchmarks.md). Version 1 allowed 64 KiB.
 */
export const MAX_CHUNK_BYTES = 256 * 1024;

/** Smallest credit window an engine accepts. */
export const MIN_WINDOW_BYTES = 64 * 1024;

/**
 * Longest delay a timer can wait: Node's setTimeout takes a signed 32-bit
 * count of milliseconds (about 24.8 days) and fires after 1 ms for anything
 * larger. Every duration a caller chooses (a call's `timeoutMs`, bash's
 * `timeout`, the grace period, the server's intervals) is refused above this
 * instead of firing at once.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;
