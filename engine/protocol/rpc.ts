/** Comlink over the per-worker port, errors keeping their sluice `code`; a worker loads it only when a tool first asks the host. */
import * as Comlink from 'comlink';
import { deserializeError, type SerializedError, SluiceError, serializeError } from './errors.js';

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
