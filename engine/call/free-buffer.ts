/**
 * Returning a received chunk's memory at once: V8 frees a transferred
 * ArrayBuffer only when a major collection finds it, which it starts only
 * once much such memory has piled up. Transferring the buffer into a port
 * whose other end is closed detaches it and frees it now (bench/memory.ts;
 * docs/benchmarks.md, "Capture").
 */
import { MessageChannel } from 'node:worker_threads';

let sink: MessageChannel['port1'] | undefined;

/** Frees the memory under `bytes` now. Only for a chunk nothing else refers to: every view of it becomes empty. */
export function freeChunk(bytes: Uint8Array): void {
  const buffer = bytes.buffer;
  if (!(buffer instanceof ArrayBuffer) || buffer.byteLength < 4096) return;
  if (!sink) {
    const channel = new MessageChannel();
    channel.port2.close();
    channel.port1.unref();
    sink = channel.port1;
  }
  sink.postMessage(null, [buffer]);
}
