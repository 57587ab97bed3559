/** The data plane's size limits, apart from the message schemas: a starting worker uses them without building those (docs/benchmarks.md, "Cold start"). */

/** Largest chunk on the wire; writes queued behind a credit wait leave as one message up to a quarter of the window, capped here. */
export const MAX_CHUNK_BYTES = 256 * 1024;

/** Exit code of a worker thread retiring itself; tasks it held that never posted `start` run elsewhere, and a tool's process.exit(85) exits with 1. */
export const RETIRE_EXIT_CODE = 85;

/**
 * A retiring thread (an abandoned call's tool may still run on it) declines
 * each task it is handed with this message and its thread id: the task never
 * started, so the pool runs it on another thread and hands that one no more.
 */
export const DECLINED_TASK_MESSAGE = 'sluice: a retiring thread declines the task, thread ';

/**
 * The worker entry's export answering a task at once: the pool queues one
 * to make piscina start a thread for calls queued while every thread was
 * retiring (engine/pool/pool.ts, `redispatch`).
 */
export const NUDGE_EXPORT = 'nudge';

/** Smallest credit window an engine accepts. */
export const MIN_WINDOW_BYTES = 64 * 1024;

/**
 * Bounds on what a tool hands back besides its output, applied in the worker
 * before anything is posted and checked again by the engine (docs/tools.md, "Bounds").
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
  /** Attachments together, base64 bytes: the read tool's media bound, encoded. */
  attachmentsBytes: 28 * 1024 * 1024,
} as const;

/** Longest delay a timer can wait (setTimeout fires at once beyond a signed 32-bit count): longer durations are refused. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
