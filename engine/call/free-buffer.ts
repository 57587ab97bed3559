/**
 * Returning a received chunk's memory at once. A chunk's bytes arrive in an
 * ArrayBuffer transferred from a worker; once they are on disk nothing needs
 * them, but V8 frees an ArrayBuffer only when a garbage collection finds it,
 * and it starts a major collection of the main heap only after tens of MiB of
 * such memory have piled up: a capture's RSS then rose by ~50 MiB in a
 * sawtooth, and marking ran for every ~64 MiB captured. Transferring the
 * buffer into a port whose other end is closed detaches it and frees its
 * memory immediately (bench/memory.ts; measured on 1 GiB of 64 KiB buffers:
 * peak growth 42 MiB dropping them, 7 MiB detaching them).
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
