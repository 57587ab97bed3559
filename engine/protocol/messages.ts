/**
 * The messages between the engine and its workers, on one port per worker
 * tagged with the call id (a channel per call costs more than a no-op call).
 * Data messages spend credit from a per-call window, returned once on disk.
 */
import type { SerializedError } from './errors.js';
import type { SandboxPolicy } from './sandbox.js';
import type { OutputDeclaration, PreviewMode } from './streams.js';
import { z } from './zod.js';

/** Version of the worker ↔ engine and wire contracts. Moves with any change to these shapes (see AGENTS.md). */
export const PROTOCOL_VERSION = 6;

export { MAX_CHUNK_BYTES, MIN_WINDOW_BYTES } from './limits.js';
export { PORT_HANDSHAKE } from './port.js';

/** An operation a tool prepared, for the host's approval policy. */
export interface PreparedOperation {
  /** What kind of operation, e.g. `fs.read`, `artifact.read`, `process.spawn`. */
  kind: string;
  [key: string]: unknown;
}

/** An attachment produced by a tool (an image, a PDF): bytes as base64 with their media type. */
export interface Attachment {
  /** e.g. `image/png`, `application/pdf`. */
  mediaType: string;
  /** The bytes, base64. */
  data: string;
  /** A file name to show. */
  name?: string;
}

/** A message a tool emits into the conversation (roles are constrained). */
export interface EmittedMessage {
  /** Who speaks: tools may not speak as the assistant. */
  role: 'user' | 'system';
  /** The message text. */
  content: string;
}

/** Terminal fields every completion may carry. */
export interface CompletionFields {
  /** Final display; replaces the live display. */
  display?: string;
  /** `failed` marks a tool-reported failure; the default is success. */
  status?: 'success' | 'failed';
  /** One short line for the model about how the call ended (e.g. `exit code 1`); shown in the status line of a failed call. */
  note?: string;
  /** A typed failure the tool finalised itself (bash's own timeout): the call fails with it, keeping display, metadata and attachments. */
  error?: SerializedError;
  metadata?: Record<string, unknown>;
  attachments?: Attachment[];
  messages?: EmittedMessage[];
}

const completionFields = {
  display: z.string().optional(),
  status: z.enum(['success', 'failed']).optional(),
  note: z.string().max(1000).optional(),
  error: z
    .object({ code: z.string(), message: z.string(), details: z.record(z.string(), z.unknown()).optional() })
    .strict()
    .optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  attachments: z
    .array(z.object({ mediaType: z.string().min(1), data: z.string(), name: z.string().optional() }).strict())
    .optional(),
  messages: z.array(z.object({ role: z.enum(['user', 'system']), content: z.string() }).strict()).optional(),
};

/** Texts the worker cut to their bound and sent whole as `text` messages: their full UTF-8 sizes. */
const cutSchema = z
  .object({ error: z.number().int().nonnegative().optional(), display: z.number().int().nonnegative().optional() })
  .strict();

/**
 * Zod schema of the terminal fields as they arrive from a worker. `cut` is
 * the worker runtime's, never the tool's: the fields it cut to their bound,
 * whose whole text went ahead as `text` messages.
 */
export const wireCompletionSchema = z
  .object({ mode: z.enum(['streamed', 'full']), ...completionFields, cut: cutSchema.optional() })
  .strict();

/** The kinds of text a worker may send whole when the field that holds it is cut. */
export type TextKind = 'error' | 'display';

/** A completion as sent by the worker runtime (full output already fed as chunks). */
export type WireCompletion = z.infer<typeof wireCompletionSchema>;

/** A tool description, as a worker reports it. */
export interface ToolDescription {
  name: string;
  description: string;
  output: OutputDeclaration;
  selfPaginating: boolean;
  /** `'shared'`: the call may share its worker thread with other calls; `'thread'`: it gets a thread to itself. */
  isolation: ToolIsolation;
  /** The tool's own choice of model preview for its truncated streams (absent: the engine's). */
  preview?: PreviewMode;
  /** JSON Schema of the arguments. */
  argsSchema: unknown;
}

/** Where a tool's calls run: `'shared'` (the default) lets one thread carry many calls; `'thread'` gives each call its own (docs/architecture.md, "Threads and calls"). */
export type ToolIsolation = 'shared' | 'thread';

/** What a `describe` task resolves to; a failure travels as a value because piscina clones thrown errors without their `code`. */
export type DescribeResult = ToolDescription | { error: SerializedError };

/** Task: describe the tool a module exports. */
export interface DescribeTask {
  kind: 'describe';
  module: string;
}

/** Task: run one call. */
export interface CallTask {
  kind: 'call';
  module: string;
  callId: string;
  args: unknown;
  /** The credit window in bytes. */
  window: number;
  cwd: string;
  /** What opens the store (Store.locator: its directory, or `s3://bucket/prefix`): tools read artifacts by possession of their URI. */
  storeDir: string;
  /** Bound on the final display, UTF-8 bytes (the engine's liveDisplayBytes): past it the worker cuts it. */
  displayBytes: number;
  /** Kinds the worker asks the approval policy about; absent, it asks about every operation (the default policy allows all but `fs.read` unseen). */
  askOnly?: string[];
  /** The sandbox the call's processes run under; absent: unconfined. */
  sandbox?: SandboxPolicy;
}

/** A piscina task. */
export type Task = DescribeTask | CallTask;

/** Worker → engine, on the worker's port. */
export type WorkerMessage =
  | { t: 'start'; c: string; output: OutputDeclaration }
  | { t: 'chunk'; c: string; s: number; b: Uint8Array }
  | { t: 'display'; c: string; text: string; n: number }
  | { t: 'proc'; c: string; pid: number }
  | { t: 'rpc'; c: string; m: unknown }
  | { t: 'text'; c: string; k: TextKind; b: Uint8Array }
  | { t: 'done'; c: string; completion: WireCompletion }
  | { t: 'fail'; c: string; error: SerializedError; cancelled: boolean; cut?: number };

/** Engine → worker, on the worker's port. */
export type EngineMessage =
  | { t: 'credit'; c: string; n: number }
  | { t: 'abort'; c: string; reason: string }
  /** The engine gave up on a cancelled call that did not stop: the worker stops waiting for it and retires its thread once idle. */
  | { t: 'abandon'; c: string }
  | { t: 'rpc'; c: string; m: unknown };
