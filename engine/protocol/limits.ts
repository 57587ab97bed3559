/**
 * The data plane's size limits (see messages.ts). Kept apart from the message
 * schemas so a worker can use them without building those schemas: zod
 * schema construction costs a starting worker about 10 ms, before its first
 * call can run.
 */

/**
 * Largest chunk on the wire; larger writes are split (anywhere: chunks are bytes).
 * A worker sends writes that queued up behind a credit wait as one message,
 * up to a quarter of its call's window (capped here): fewer, larger messages
 * cost both threads less (docs/benchmarks.md, "Capture"). Version 1 allowed 64 KiB.
 */
export const MAX_CHUNK_BYTES = 256 * 1024;

/**
 * The exit code of a worker thread that retires itself (it found work a
 * finished call left behind, or carried an abandoned call). Tasks the thread
 * held that never posted `start` ran no tool code, so the pool runs them again
 * elsewhere; a tool calling process.exit with this code is given code 1.
 */
export const RETIRE_EXIT_CODE = 85;

/** Smallest credit window an engine accepts. */
export const MIN_WINDOW_BYTES = 64 * 1024;

/**
 * Bounds on what a tool hands back besides its output, applied in the
 * worker before anything is posted (so an oversized field never crosses
 * to the main thread) and checked again by the engine. docs/tools.md,
 * "Bounds", is the table of them all.
 */
export const COMPLETION_BOUNDS = {
  /** An error's message, UTF-8 bytes; past it the message is cut and kept whole as an artifact. */
  errorMessageBytes: 16 * 1024,
  /** An error's details, bytes of JSON; past it they are replaced by a cut of their JSON. */
  errorDetailsBytes: 16 * 1024,
  /** A completion's note, UTF-16 units (one short line for the model). */
  noteChars: 1000,
  /** Emitted messages per completion. */
  messages: 64,
  /** One emitted message's content, UTF-8 bytes; past it the content is cut. */
  messageBytes: 64 * 1024,
  /** Metadata and emitted messages together, bytes of JSON. */
  fieldsBytes: 1024 * 1024,
  /** Attachments per completion. */
  attachments: 16,
  /** Attachments together, base64 bytes: the read tool's 20 MiB media bound, encoded. */
  attachmentsBytes: 28 * 1024 * 1024,
} as const;

/**
 * Longest delay a timer can wait: Node's setTimeout takes a signed 32-bit
 * count of milliseconds (about 24.8 days) and fires after 1 ms for anything
 * larger. Every duration a caller chooses (a call's `timeoutMs`, bash's
 * `timeout`, the grace period, the server's intervals) is refused above this
 * instead of firing at once.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;
