/**
 * The call-worker side of the MCP adapter: one request to the host thread
 * over BroadcastChannels. EWORKERCRASH when the host thread is announced
 * dead or does not acknowledge in time; an unacknowledged request is sent
 * again when a (restarted) host thread announces itself.
 */
import { randomUUID } from 'node:crypto';
import { BroadcastChannel } from 'node:worker_threads';
import { deserializeError, ProtocolError, WorkerCrashError } from '../../engine/protocol/errors.js';
import {
  lifeChannel,
  MCP_ACK_MS,
  type McpLifeEvent,
  type McpReply,
  type McpRequest,
  replyChannel,
  requestChannel,
} from '../../engine/protocol/mcp.js';

type Final = Extract<McpReply, { t: 'result' } | { t: 'def' }>;
type Body =
  | { t: 'call'; call: string; server: string; tool: string; arguments: Record<string, unknown> }
  | { t: 'def'; server: string; tool: string };

/** Options of {@link hostRequest}. */
export interface HostRequestOptions {
  /** Aborting it cancels the request on the server and rejects with the signal's reason at once. */
  signal?: AbortSignal;
  /** Progress the server reports while the request runs. */
  onProgress?: (p: Extract<McpReply, { t: 'progress' }>) => void;
}

/** Calls an MCP tool through the host thread of `hostId`, for engine call `call` (whose end releases what the host holds for it). */
export async function hostCall(
  hostId: string,
  body: Omit<Extract<Body, { t: 'call' }>, 't'>,
  options: HostRequestOptions = {},
): Promise<Extract<Final, { t: 'result' }>['outcome']> {
  const r = await hostRequest(hostId, { t: 'call', ...body }, options);
  if (r.t !== 'result') throw new ProtocolError(`the MCP host answered a call with ${r.t}`);
  return r.outcome;
}

/** The definition (JSON Schema) of an MCP tool, from the host thread of `hostId`. */
export async function hostDef(
  hostId: string,
  body: Omit<Extract<Body, { t: 'def' }>, 't'>,
  options: HostRequestOptions = {},
): Promise<Extract<Final, { t: 'def' }>['def']> {
  const r = await hostRequest(hostId, { t: 'def', ...body }, options);
  if (r.t !== 'def') throw new ProtocolError(`the MCP host answered a definition request with ${r.t}`);
  return r.def;
}

/** Sends one request to the host thread of `hostId` and resolves with its final reply. */
function hostRequest(hostId: string, body: Body, options: HostRequestOptions): Promise<Final> {
  const id = randomUUID();
  const { signal, onProgress } = options;
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    // Opened before the request is sent, so no reply can arrive before anyone listens.
    const replies = new BroadcastChannel(replyChannel(hostId, id));
    const life = new BroadcastChannel(lifeChannel(hostId));
    const post = (m: McpRequest) => {
      const requests = new BroadcastChannel(requestChannel(hostId));
      requests.postMessage(m);
      // Closed at once: an open instance would also receive (and clone) other workers' requests.
      requests.close();
    };
    let done = false;
    let accepted = false;
    const finish = (err: unknown, value?: Final) => {
      if (done) return;
      done = true;
      clearTimeout(ackTimer);
      signal?.removeEventListener('abort', onAbort);
      replies.close();
      life.close();
      if (err !== undefined) reject(err);
      else resolve(value as Final);
    };
    const onAbort = () => {
      post({ t: 'cancel', id });
      finish(signal?.reason);
    };
    const ackTimer = setTimeout(
      () => finish(new WorkerCrashError(`the MCP host thread did not answer within ${MCP_ACK_MS} ms`)),
      MCP_ACK_MS,
    );
    replies.onmessage = (ev) => {
      const r = (ev as unknown as { data: McpReply }).data;
      if (r.t === 'accepted') {
        accepted = true;
        clearTimeout(ackTimer);
      } else if (r.t === 'progress') onProgress?.(r);
      else if (r.t === 'error') finish(deserializeError(r.error));
      else finish(undefined, r);
    };
    life.onmessage = (ev) => {
      const e = (ev as unknown as { data: McpLifeEvent }).data;
      if (e.t === 'host-exit') finish(new WorkerCrashError(`the MCP host thread died: ${e.reason}`));
      else if (e.t === 'host-ready' && !accepted && !done) post({ ...body, id } as McpRequest);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    post({ ...body, id } as McpRequest);
  });
}
