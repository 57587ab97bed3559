/**
 * Moving a child's pipe into a stream writer in message-sized pieces. A
 * pipe read returns what the producer has written since the last one: when
 * the reader keeps up, 16-25 KiB (~50,000 reads per GiB, measured with
 * `yes | head`). Written one by one, each read is a write through the
 * writer's stream machinery; gathered here, a GiB is ~4,000 writes of up to
 * a message each, handed over so the writer moves them to the engine
 * uncopied (workers/transfer.ts). A byte is copied at most once: reads
 * written together are copied into one buffer of exactly their size, and a
 * read written alone (every read of a small output, and a read of
 * {@link HAND_OVER_READ_BYTES} or more that finds nothing gathered) is
 * handed over as it is. Either goes uncopied when the writer sends it at
 * once (one queued behind a credit wait is grouped with the writes queued
 * beside it, workers/context.ts).
 *
 * Backpressure is the writer's: when a write returns false the pipe is
 * paused until 'drain' (and the producer blocks on the full pipe). What is
 * gathered goes out before a read would take it past a message, after
 * {@link MAX_PARTS} reads, at the pipe's end, and at most
 * {@link GATHER_MS} after its first byte, so output that trickles is seen
 * soon; the delay bounds only how late bytes are seen, never what is stored.
 */
import type { Readable, Writable } from 'node:stream';
import { handOver } from './transfer.js';

/** Longest gathered bytes wait for more before they are written. */
const GATHER_MS = 2;

/**
 * Most reads gathered into one write. Each is a buffer of its own, so a
 * producer that trickles a byte at a time, read faster than it writes, must
 * not pile up thousands of them before the timer (or the message's size)
 * writes them; a fast producer's reads fill a message in 10-16.
 */
const MAX_PARTS = 64;

/**
 * A read at least this long (when nothing is gathered) goes as a message of
 * its own, uncopied: a pipe read's buffer is exactly the read. With one
 * fast producer reads are mostly 16-25 KiB and still gathered; with 16
 * calls sharing two threads they are 32-64 KiB, and copying those into
 * sixteen 256 KiB gathering buffers (4 MiB, past the cache) costs more
 * than the extra messages: 16 x 128 MiB use 4.2-4.9 s of the engine's CPU
 * this way, 5.3-6.5 s gathered (docs/benchmarks.md, "Concurrent captures").
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
   * Starts reading at once: no await may come between this and the
   * process's start. `onData` sees every read before it is gathered (the
   * tool's display); it must not keep the chunk or a view of it, because a
   * read may move to the engine (and every view of it empty): a read of
   * {@link HAND_OVER_READ_BYTES} or more before the 'data' event's listeners
   * return, any other when it is written. Nothing else may listen for
   * `src`'s 'data', for the same reason.
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
      // A pipe can end (and close) before this runs: a socket reads as soon as it exists, and a
      // process that printed nothing may be gone while the spawn was being reported.
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
      // Big enough to be a message of its own: it goes as it is (a pipe read's buffer is ours to give).
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
    // One read goes as it is: a pipe read's buffer is exactly the read, so it moves uncopied. Several
    // are copied once, into a buffer of exactly their size, which moves. (A buffer of the message's
    // size, allocated for the first byte, would make every small call allocate 256 KiB per stream:
    // external memory that starts a Mark-Compact in each worker every ~80 calls; docs/benchmarks.md,
    // "Small calls and spawning".)
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
