/** Comlink's endpoint for one call on the shared per-worker port, tagged with the call id; comlink's types only, since workers load comlink lazily. */
import type * as Comlink from 'comlink';

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

  addEventListener(_type: string, listener: unknown): void {
    this.listeners.add(listener as Listener);
  }

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
