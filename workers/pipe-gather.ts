/**
 * Moves a child's pipe into a stream writer in message-sized pieces: one
 * write per read would cost the writer's stream machinery per read. A byte
 * is copied at most once: reads gathered together are copied into one
 * buffer of their exact size; a read written alone is handed over as it is
 * (workers/transfer.ts). Backpressure is the writer's: a false write pauses
 * the pipe until 'drain'. Gathered bytes go out before a read would pass a
 * message, after {@link MAX_PARTS} reads, at the end, and {@link GATHER_MS}
 * after their first byte: the delay bounds when bytes are seen, never what
 * is stored. Read sizes: docs/benchmarks.md, "Capture".
 */
import type { Readable, Writable } from 'node:stream';
import { handOver } from './transfer.js';

/** Longest gathered bytes wait for more before they are written. */
const GATHER_MS = 2;

/** Most reads per write: a byte-at-a-time producer must not pile up thousands of buffers. */
const MAX_PARTS = 64;

/**
 * A read this long (nothing gathered) goes alone, uncopied: copying many
 * such reads into gathering buffers costs more than the extra messages
 * (docs/benchmarks.md, "Concurrent captures").
 */
const HAND_OVER_READ_BYTES = 32 * 1024;

/** Gathers `src` into `dst` (see the module comment). */
export class PipeGather {
  /** Bytes read so far. */
  bytes = 0;
  /** Resolves once `dst` has finished; rejects (both destroyed) on an error of either, or `src` closing before its end. */
  readonly done: Promise<void>;
  private readonly dst: Writable;
  private readonly size: number;
  /** Reads gathered and not yet written, oldest first, and their length. */
  private parts: Buffer[] = [];
  private used = 0;
  private timer: NodeJS.Timeout | undefined;

  /**
   * Starts reading at once: no await may come between this and the spawn.
   * `onData` sees every read first and must not keep it or a view of it: a
   * read may move to the engine (emptying its views). Nothing else may
   * listen for `src`'s 'data', for the same reason.
   */
  constructor(src: Readable, dst: Writable, onData: (chunk: Buffer) => void) {
    this.dst = dst;
    // The writer's high-water mark is its message size (workers/context.ts).
    this.size = Math.max(4096, dst.writableHighWaterMark);
    this.done = new Promise((resolve, reject) => {
      let settled = false;
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        this.stopTimer();
        this.parts = [];
        src.destroy();
        dst.destroy();
        reject(err);
      };
      src.on('error', fail);
      dst.on('error', fail);
      const closed = () => {
        if (!src.readableEnded) fail(new Error('the pipe closed before its end'));
      };
      // The pipe may have closed already: a process that printed nothing may be gone.
      if (src.destroyed) process.nextTick(closed);
      else src.once('close', closed);
      dst.once('finish', () => {
        if (settled) return;
        settled = true;
        resolve();
      });
      const resume = () => src.resume();
      src.on('data', (chunk: Buffer) => {
        this.bytes += chunk.length;
        onData(chunk);
        if (!this.take(chunk)) {
          src.pause();
          dst.once('drain', resume);
        }
      });
      const ended = () => {
        this.flush();
        dst.end();
      };
      if (src.readableEnded) process.nextTick(ended);
      else src.once('end', ended);
    });
  }

  /** Gathers one read; false when a write asked to wait for 'drain'. */
  private take(chunk: Buffer): boolean {
    if (chunk.length === 0) return true;
    let ok = true;
    // What is gathered goes first when this read would take it past a message.
    if (this.used + chunk.length > this.size) ok = this.flush();
    if (this.used === 0 && chunk.length >= Math.min(this.size / 2, HAND_OVER_READ_BYTES)) {
      this.stopTimer();
      return this.dst.write(handOver(chunk)) && ok;
    }
    this.parts.push(chunk);
    this.used += chunk.length;
    if (this.used === this.size || this.parts.length === MAX_PARTS) return this.flush() && ok;
    if (this.timer === undefined) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.flush();
      }, GATHER_MS);
      this.timer.unref();
    }
    return ok;
  }

  /** Writes what is gathered, if anything; returns what the write returned. */
  private flush(): boolean {
    this.stopTimer();
    const parts = this.parts;
    const n = this.used;
    this.parts = [];
    this.used = 0;
    if (n === 0 || this.dst.destroyed || this.dst.writableEnded) return true;
    // One read moves uncopied; several are copied once into a buffer of their size. A
    // message-sized buffer per stream would start Mark-Compacts (docs/benchmarks.md).
    if (parts.length === 1) return this.dst.write(handOver(parts[0] as Buffer));
    const buf = Buffer.allocUnsafeSlow(n);
    let at = 0;
    for (const p of parts) {
      buf.set(p, at);
      at += p.length;
    }
    return this.dst.write(handOver(buf));
  }

  private stopTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
