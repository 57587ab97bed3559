/**
 * Worker side of bench/channel.ts: a no-op task that posts one 100-byte
 * message either on a port transferred with the task (fresh channel per call)
 * or on the thread's long-lived port (multiplexed by id).
 */
import { MessageChannel, type MessagePort, parentPort } from 'node:worker_threads';

let shared: MessagePort | undefined;
const PAYLOAD = 'x'.repeat(100);

function sharedPort(): MessagePort {
  if (!shared) {
    const { port1, port2 } = new MessageChannel();
    port1.unref();
    parentPort?.postMessage({ benchPort: port2 }, [port2]);
    shared = port1;
  }
  return shared;
}

export default function task(t: { mode: 'fresh' | 'shared' | 'none'; id: number; port?: MessagePort }): number {
  if (t.mode === 'fresh' && t.port) {
    t.port.postMessage({ id: t.id, text: PAYLOAD });
    t.port.close();
  } else if (t.mode === 'shared') {
    sharedPort().postMessage({ id: t.id, text: PAYLOAD });
  }
  return t.id;
}
