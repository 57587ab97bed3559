/** The worker side of the per-worker port: one MessagePort to the engine for life, multiplexed by call id. */
import { MessageChannel, type MessagePort, parentPort, threadId } from 'node:worker_threads';
import type { EngineMessage, WorkerMessage } from '../engine/protocol/messages.js';
import { PORT_HANDSHAKE } from '../engine/protocol/port.js';

type Handler = (m: EngineMessage) => void;

let port: MessagePort | undefined;
const handlers = new Map<string, Handler>();

/** The thread's port to the engine (created and handed over on first use). */
export function enginePort(): MessagePort {
  if (port) return port;
  if (!parentPort) throw new Error('sluice workers run only inside worker threads');
  const { port1, port2 } = new MessageChannel();
  port1.on('message', (m: EngineMessage) => handlers.get(m.c)?.(m));
  // Calls keep the thread alive through their task; an idle port must not.
  port1.unref();
  parentPort.postMessage({ [PORT_HANDSHAKE]: true, threadId, port: port2 }, [port2]);
  port = port1;
  return port1;
}

/** Routes engine messages for `callId` to `handler` until the returned function is called. */
export function onEngineMessage(callId: string, handler: Handler): () => void {
  enginePort();
  handlers.set(callId, handler);
  return () => {
    handlers.delete(callId);
  };
}

/** Posts a control message to the engine. */
export function post(m: WorkerMessage): void {
  enginePort().postMessage(m);
}

/**
 * Posts a chunk, transferred, never cloned (cloning a view clones its whole
 * buffer). Bytes not `owned` by the runtime are copied first: the tool may
 * still hold them. An owned view moves with its buffer when it fills half of
 * it, else is copied to size: a message never carries twice its bytes.
 */
export function postChunk(c: string, s: number, b: Uint8Array, owned: boolean): void {
  const transfer = owned && b.byteOffset === 0 && b.byteLength * 2 >= b.buffer.byteLength;
  const bytes = transfer ? b : new Uint8Array(b);
  enginePort().postMessage({ t: 'chunk', c, s, b: bytes } satisfies WorkerMessage, [bytes.buffer as ArrayBuffer]);
}

/** Posts part of a cut text (its own buffer, made by the runtime: transferred). */
export function postText(c: string, k: 'error' | 'display', b: Uint8Array): void {
  const bytes = b.byteOffset === 0 && b.byteLength === b.buffer.byteLength ? b : new Uint8Array(b);
  enginePort().postMessage({ t: 'text', c, k, b: bytes } satisfies WorkerMessage, [bytes.buffer as ArrayBuffer]);
}
