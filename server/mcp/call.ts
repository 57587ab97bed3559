/**
 * One MCP `tools/call` as one engine call: the request's abort signal (the
 * SDK aborts it on `notifications/cancelled`, or when the connection ends)
 * cancels the call the engine's way (process groups killed, the cancelled
 * result recorded); while it runs, a client that gave a `progressToken` gets
 * `notifications/progress` from the call's progress events, and a heartbeat
 * while it is silent, so a client that resets its timeout on progress does
 * not give up on a long quiet command.
 */
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  type CallToolRequest,
  type CallToolResult,
  ErrorCode,
  McpError,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import type { CallHandle } from '../../engine/call/call-types.js';
import type { Engine } from '../../engine/engine.js';
import { toSluiceError } from '../../engine/protocol/errors.js';
import type { TerminalResult } from '../../engine/result.js';
import { toCallToolResult } from './result.js';

/** Longest silence, in milliseconds, before a progress notification says the call is still running. */
export const PROGRESS_HEARTBEAT_MS = 1000;

/** What the SDK hands a request handler. */
export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** Sluice error codes that mean the request was wrong, not that the tool failed: typed MCP errors. */
const INVALID_PARAMS = new Set(['EBADARGS', 'EUNKNOWNTOOL']);

/** The MCP error for a sluice error that belongs to the protocol (its code and details kept in `data`). */
function invalidParams(code: string, message: string, details?: Record<string, unknown>): McpError {
  return new McpError(ErrorCode.InvalidParams, message, { code, ...(details ? { details } : {}) });
}

function describe(streams: Array<{ name: string; bytes: number; lines: number }>, elapsedMs: number): string {
  const parts = streams.map((s) => `${s.name || 'output'} ${s.lines} lines ${s.bytes} B`);
  return `${(elapsedMs / 1000).toFixed(1)} s${parts.length > 0 ? `: ${parts.join(', ')}` : ''}`;
}

/**
 * Sends progress for `handle` until `done` settles. The value is the
 * call's elapsed milliseconds (it must grow with every notification, which
 * byte counts do not do while a call is silent); the message has the counts.
 * A notification that cannot be sent is dropped: progress is advisory.
 */
async function reportProgress(
  handle: CallHandle,
  token: string | number,
  extra: Extra,
  done: Promise<unknown>,
): Promise<void> {
  const started = Date.now();
  let last = 0;
  let counts: Array<{ name: string; bytes: number; lines: number }> = [];
  let ended = false;
  const send = () => {
    if (ended) return;
    const progress = Math.max(last + 1, Date.now() - started);
    last = progress;
    extra
      .sendNotification({
        method: 'notifications/progress',
        params: { progressToken: token, progress, message: describe(counts, progress) },
      })
      .catch(() => {});
  };
  let heartbeat = setInterval(send, PROGRESS_HEARTBEAT_MS);
  const events = handle.events();
  void done.finally(() => {
    ended = true;
    clearInterval(heartbeat);
    void events.return?.();
  });
  for await (const ev of events) {
    if (ended) break;
    if (ev.type !== 'progress') continue;
    counts = ev.streams;
    send();
    clearInterval(heartbeat);
    heartbeat = setInterval(send, PROGRESS_HEARTBEAT_MS);
  }
}

/** What the caller of {@link callTool} may observe of a call. */
export interface CallHooks {
  /** Throws (a sluice error) to refuse a call before it starts: `sluice serve` bounds the calls it runs at once. */
  admit?(): void;
  /** The call started (the HTTP server tracks it, so its API and web view show it). */
  started?(handle: CallHandle, tool: string): void;
  /** The call ended with this result. */
  finished?(result: TerminalResult): void;
}

/**
 * Runs `tools/call` on `engine`, recorded in `session`. Resolves to the
 * result (a failed or cancelled call is `isError: true`, its output kept);
 * rejects with an MCP error (InvalidParams) for an unknown tool or arguments
 * the tool's schema refuses, whose `data.code` is the sluice code.
 */
export async function callTool(
  engine: Engine,
  session: string,
  request: CallToolRequest,
  extra: Extra,
  hooks: CallHooks = {},
): Promise<CallToolResult> {
  const { name, arguments: args } = request.params;
  let handle: CallHandle;
  try {
    hooks.admit?.();
    handle = engine.call(name, args ?? {}, { session, signal: extra.signal });
  } catch (err) {
    const e = toSluiceError(err);
    if (INVALID_PARAMS.has(e.code)) throw invalidParams(e.code, e.message, e.details);
    throw new McpError(ErrorCode.InternalError, e.message, { code: e.code });
  }
  hooks.started?.(handle, name);
  const token = request.params._meta?.progressToken;
  const progress = token === undefined ? undefined : reportProgress(handle, token, extra, handle.result);
  // Not awaited: `ended` stops it as the result arrives, so nothing follows the response.
  void progress?.catch(() => {});
  const result = await handle.result;
  hooks.finished?.(result);
  if (result.error && INVALID_PARAMS.has(result.error.code)) {
    throw invalidParams(result.error.code, result.error.message, result.error.details);
  }
  return toCallToolResult(result);
}
