/**
 * Messages of the MCP adapter between the main thread, the MCP host thread
 * and call workers, which reach the host over a BroadcastChannel named by the
 * engine's random host id (piscina workers have no port to the host thread).
 */

import type { SerializedError } from './errors.js';
import type { Attachment } from './messages.js';
import type { SandboxPolicy } from './sandbox.js';

/** Server names: a sluice tool-name prefix without dots, so `<server>.<tool>` splits one way only. */
export const MCP_SERVER_NAME = /^[a-z][a-z0-9_-]{0,31}$/;

/** What the host thread needs to start one server (validated and defaulted on the main thread). */
export interface McpServerSpec {
  /** Server name: `[a-z][a-z0-9_-]{0,31}`, the prefix of its tools' names. */
  name: string;
  /** Executable, looked up on PATH. */
  command: string;
  args: string[];
  /** Added to the small default environment (HOME, LOGNAME, PATH, SHELL, TERM, USER). */
  env: Record<string, string>;
  cwd: string;
  /** Largest JSON-RPC message accepted from the server, in bytes. */
  maxMessageBytes: number;
  /** The sandbox the server runs under (docs/security.md); absent: unconfined. */
  sandbox?: SandboxPolicy;
}

/** A tool as a server lists it. */
export interface McpToolDef {
  /** The server's name for it (any case, any characters). */
  name: string;
  description: string;
  /** The server's JSON Schema of the arguments, as listed. */
  inputSchema: Record<string, unknown>;
}

/** The result of one MCP call, reduced to what a sluice completion carries. */
export interface McpCallOutcome {
  /** Text content items joined with `\n` (embedded text resources and resource links included); empty when `spilled`. */
  text: string;
  /** A result too large to hold: its text is these parts, in a file the host thread keeps open (workers/mcp/spill.ts). */
  spilled?: McpSpillRef;
  /** Images, audio and binary resources, within the attachment bounds (`COMPLETION_BOUNDS`). */
  attachments: Attachment[];
  /** The server's `isError`: the call failed and `text` says why. */
  isError: boolean;
}

/** A span of a spill file: JSON-escaped string bytes, or (`raw`) JSON copied as it is. */
export interface McpSpillSpan {
  start: number;
  end: number;
  raw?: boolean;
}

/**
 * The text of a spilled result: `parts` in order, each a string or a span
 * of the file the host thread holds open as `fd`. The worker never reads
 * through that number, which the host may close (it died, the engine
 * closed) and the process reuse for another file: it opens a descriptor of
 * its own (`/proc/self/fd/<fd>`) and reads only when that is the file the
 * host reported: `dev` and `ino` (decimal), and `path`, the unique name it
 * was created under before it was unlinked (an inode number is reused once
 * its file is gone; the name is random). The host holds the file until the
 * engine tells it the call has ended (`ended`), however it ended. `attachments` are spilled images,
 * audio and blobs within the attachment bounds, read into the completion's
 * attachments.
 */
export interface McpSpillRef {
  token: string;
  fd: number;
  dev: string;
  ino: string;
  path: string;
  parts: Array<string | McpSpillSpan>;
  attachments: Array<{ mediaType: string; name?: string; span: McpSpillSpan }>;
}

/** Data the host thread starts with. */
export interface McpHostData {
  /** Random id naming the host's BroadcastChannels; unguessable, so only this engine's tool modules find it. */
  hostId: string;
  /** Where spill files of large messages go: the store's tmp/ (same disk, cleaned with the store). */
  spillDir: string;
}

/** Main → host thread (its parentPort). */
export type McpControl =
  | { id: number; op: 'add'; spec: McpServerSpec }
  | { id: number; op: 'restore'; spec: McpServerSpec; tools: McpToolDef[] }
  | { id: number; op: 'remove'; name: string }
  | { id: number; op: 'shutdown' }
  /**
   * Engine call `callId` has ended, however it ended (its worker may have
   * been terminated): its requests are aborted, its spill files closed, and
   * a request of it that arrives later is refused. Not answered.
   */
  | { id: number; op: 'ended'; callId: string };

/** Host thread → main. */
export type McpHostEvent =
  | { t: 'reply'; id: number; tools?: McpToolDef[]; error?: SerializedError }
  | { t: 'spawned'; server: string; pid: number }
  | { t: 'exited'; server: string; pid: number };

/** Call worker → host thread, on {@link requestChannel}; `call` is the engine call the request belongs to. */
export type McpRequest =
  | { t: 'call'; id: string; call: string; server: string; tool: string; arguments: Record<string, unknown> }
  | { t: 'def'; id: string; server: string; tool: string }
  | { t: 'cancel'; id: string };

/** Host thread → call worker, on {@link replyChannel} of the request. */
export type McpReply =
  | { t: 'accepted' }
  | { t: 'progress'; progress: number; total?: number; message?: string }
  | { t: 'result'; outcome: McpCallOutcome }
  | { t: 'def'; def: McpToolDef }
  | { t: 'error'; error: SerializedError };

/** On {@link lifeChannel}: the host died, or a new host listens (requests sent while it started are sent again). */
export type McpLifeEvent = { t: 'host-exit'; reason: string } | { t: 'host-ready' };

/** Where call workers send requests. */
export function requestChannel(hostId: string): string {
  return `sluice.mcp/${hostId}`;
}

/** Where the host answers request `id`. */
export function replyChannel(hostId: string, id: string): string {
  return `sluice.mcp/${hostId}/reply/${id}`;
}

/** Where the main thread announces the host thread's death. */
export function lifeChannel(hostId: string): string {
  return `sluice.mcp/${hostId}/life`;
}

/** A call worker gives up on a request the host has not acknowledged after this long (the host thread is gone). */
export const MCP_ACK_MS = 10_000;

/**
 * Default bound on one message from a server. A message past 1 MiB is
 * spilled to a file and its large parts never held (workers/mcp/spill.ts),
 * so this bounds disk, not memory; a larger message fails its call alone.
 */
export const MCP_DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024 * 1024;
