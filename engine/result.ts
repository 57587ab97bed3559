/** The terminal result of a call, as returned, recorded and served; its JSON shape is a public contract (docs/protocol.md). */
import type { SerializedError } from './protocol/errors.js';
import type { Attachment, EmittedMessage } from './protocol/messages.js';
import type { SandboxPolicy } from './protocol/sandbox.js';

/** How a call ended. */
export type CallStatus = 'success' | 'failed' | 'cancelled';

/** One published stream of named output. */
export interface StreamRef {
  /** The declared stream name. */
  name: string;
  /** SHA-256 of the stream's bytes: read it as `artifact://<manifest>/<name>` (or by this digest). */
  digest: string;
  /** Size of the whole stream. */
  bytes: number;
  /** Lines in the whole stream (a final `\n` ends the last line). */
  lines: number;
  /** True when the model view shows only a prefix (and a read hint for the rest). */
  truncated: boolean;
}

/** References to the published output of a call. */
export type OutputRef =
  | { kind: 'single'; digest: string; bytes: number; lines: number; truncated: boolean }
  | { kind: 'streams'; manifest: string; streams: StreamRef[] }
  | { kind: 'page'; bytes: number; lines: number };

/** A text kept whole as an artifact: read it as `artifact://<digest>`. */
export interface TextRef {
  /** SHA-256 of the text's UTF-8 bytes. */
  digest: string;
  /** Its size in bytes. */
  bytes: number;
}

/** Texts of a result that were longer than their bounds (docs/tools.md, "Bounds"): the result holds them cut; here is each whole. */
export interface FullTextRefs {
  /** The whole of `error.message`. */
  error?: TextRef;
  /** The whole final display. */
  display?: TextRef;
}

/** Everything known about a finished call. */
export interface TerminalResult {
  /** The call's id. */
  callId: string;
  /** The tool's registered name. */
  tool: string;
  /** The session it is recorded in, if any. */
  session?: string;
  /** How it ended: `success`, `failed` or `cancelled`. */
  status: CallStatus;
  /** True only when the tool finished normally and all of its output was captured. */
  complete: boolean;
  /** Final UI display (replaces the live display). */
  display: string;
  /** The model view: bounded previews with read hints. */
  model: string;
  /** Published output; null when nothing could be published (e.g. a disk error). `page` for self-paginating tools, whose output is not retained. */
  output: OutputRef | null;
  /** The tool's result metadata (bash: exitCode, signal, timedOut, ...). */
  metadata: Record<string, unknown>;
  /** Images and other media the tool returned (none for a cancelled call). */
  attachments: Attachment[];
  /** Messages the tool emitted into the conversation. */
  messages: EmittedMessage[];
  /** Why the call did not succeed. */
  error?: SerializedError;
  /** Where the whole error message and final display are, when they were cut to their bounds. */
  fullText?: FullTextRefs;
  /** The sandbox policy the call's processes ran under (docs/security.md); absent: unconfined. */
  sandbox?: SandboxPolicy;
  /** ISO time the call started. */
  startedAt: string;
  /** Milliseconds from start to the terminal result. */
  durationMs: number;
}

/** Events of a call, in order: started, any number of display deltas, completed. */
export type CallEvent =
  | { type: 'started'; callId: string; tool: string; session?: string; at: string }
  | { type: 'display'; callId: string; text: string }
  | {
      type: 'progress';
      callId: string;
      /** Milliseconds since the call started. */
      elapsedMs: number;
      /** Bytes and lines each stream has accepted so far, in declaration order (`''` names a single output). */
      streams: Array<{ name: string; bytes: number; lines: number }>;
    }
  | { type: 'completed'; callId: string; result: TerminalResult };
