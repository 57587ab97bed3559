/**
 * Comlink over the per-worker port: host services reach a tool through a
 * virtual endpoint that tags comlink's messages with the call id, so no extra
 * channel is created per call. Errors keep their sluice `code` across the
 * boundary (comlink's default throw handler keeps only name and message).
 */
import * as Comlink from 'comlink';
import { deserializeError, type SerializedError, SluiceError, serializeError } from './errors.js';

type Listener = (ev: { data: unknown }) => void;

/** A comlink endpoint multiplexed on a shared port by call id. */
export class CallEndpoint {
  private readonly listeners = new Set<Listener>();
  private readonly send: (m: unknown) => void;

  /** @param send posts one tagged rpc message on the shared port */
  constructor(send: (m: unknown) => void) {
    this.send = send;
  }

  /** Comlink's send side. Transfers are never used by sluice's host services. */
  postMessage(message: unknown): void {
    this.send(message);
  }

  /** Comlink's receive side. */
  addEventListener(_type: string, listener: unknown): void {
    this.listeners.add(listener as Listener);
  }

  /** Comlink's unsubscribe. */
  removeEventListener(_type: string, listener: unknown): void {
    this.listeners.delete(listener as Listener);
  }

  /** This endpoint as comlink's type (comlink's typings assume DOM globals). */
  asComlink(): Comlink.Endpoint {
    return this as unknown as Comlink.Endpoint;
  }

  /** Delivers an rpc message that arrived for this call. */
  deliver(m: unknown): void {
    for (const l of this.listeners) l({ data: m });
  }
}

let installed = false;

/** Makes thrown errors cross comlink with their code. Idempotent; both sides call it. */
export function installErrorTransfer(): void {
  if (installed) return;
  installed = true;
  // comlink does not export its throw marker; its own handler still recognises thrown values.
  const original = Comlink.transferHandlers.get('throw');
  if (!original) throw new Error('comlink has no throw transfer handler');
  const handler: Comlink.TransferHandler<{ value: unknown }, SerializedError> = {
    canHandle: (v): v is { value: unknown } => original.canHandle(v),
    serialize: ({ value }) => [serializeError(value), []],
    deserialize: (s) => {
      throw deserializeError(s);
    },
  };
  Comlink.transferHandlers.set('throw', handler as unknown as Comlink.TransferHandler<unknown, unknown>);
}

export { Comlink, SluiceError };
