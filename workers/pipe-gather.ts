/**
 * Moves a child's pipe into a stream writer in message-sized pieces: one
 * write per read would cost the writer's stream machinery per read. A byte
 * is copied at most once. A pipe socket is read straight into message
 * buffers (workers/pipe-handle.ts): a buffer filled by reads moves to the
 * engine as it is (workers/transfer.ts), and what was written before it
 * filled is copied out. Any other stream is gathered: reads gathered
 * together are copied into one buffer of their exact size; a read written
 * alone is handed over as it is. Backpressure is the writer's: a false
 * write stops reading until 'drain'. Bytes go out when a message is full,
 * at the end, and {@link GATHER_MS} after their first byte (gathered: also
 * before a read would pass a message, and after {@link MAX_PARTS} reads):
 * the delay bounds when bytes are seen, never what is stored. Read sizes:
 * docs/benchmarks.md, "Capture".
 */
import type { Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { takeOverPipe } from './pipe-handle.js';
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

/**
 * A pipe's first buffer: a small output (most calls, and most stderr) costs
 * no message-sized buffer, which per call would start collections sooner.
 */
const FIRST_BUFFER_BYTES = 16 * 1024;

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
  private readonly onData: (chunk: Buffer) => void;
  private readonly src: Readable;
  /** The next buffer is the pipe's first. */
  private first = true;
  /** Read straight into buffers: the socket that now holds the pipe. */
  private direct: Socket | undefined;
  /** The buffer reads land in, how far they filled it, and how much of that was written. */
  private cur: Buffer | undefined;
  private at = 0;
  private sent = 0;
  /** A write returned false: reading waits for 'drain'. */
  private stalled = false;

  /**
   * Starts reading at once: no await may come between this and the spawn.
   * `onData` sees every read first and must not keep it or a view of it: a
   * read may move to the engine (emptying its views). Nothing else may
   * listen for `src`'s 'data', for the same reason.
   */
  constructor(src: Readable, dst: Writable, onData: (chunk: Buffer) => void) {
    this.dst = dst;
    this.onData = onData;
    this.src = src;
    // The writer's high-water mark is its message size (workers/context.ts).
    this.size = Math.max(4096, dst.writableHighWaterMark);
    const taken = takeOverPipe(src, { buffer: () => this.room(), landed: (n) => this.landed(n) });
    const pipe: Readable = taken?.socket ?? src;
    this.direct = taken?.socket;
    this.done = new Promise((resolve, reject) => {
      let settled = false;
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        this.stopTimer();
        this.parts = [];
        pipe.destroy();
        dst.destroy();
        reject(err);
      };
      pipe.on('error', fail);
      dst.on('error', fail);
      const closed = () => {
        if (!pipe.readableEnded) fail(new Error('the pipe closed before its end'));
      };
      // The pipe may have closed already: a process that printed nothing may be gone.
      if (pipe.destroyed) process.nextTick(closed);
      else pipe.once('close', closed);
      dst.once('finish', () => {
        if (settled) return;
        settled = true;
        resolve();
      });
      if (taken) {
        // Read before the takeover: written first, ahead of every read to come.
        const first = taken.buffered;
        if (first && first.length > 0) {
          this.bytes += first.length;
          onData(first);
          if (!dst.write(handOver(first))) this.stall(true);
        }
      } else {
        pipe.on('data', (chunk: Buffer) => {
          this.bytes += chunk.length;
          onData(chunk);
          if (!this.take(chunk)) this.stall(true);
        });
      }
      const ended = () => {
        if (this.direct) this.flushDirect();
        else this.flush();
        dst.end();
      };
      if (pipe.readableEnded) process.nextTick(ended);
      else pipe.once('end', ended);
    });
  }

  /** Stops reading until 'drain' (`pause`: outside a read's callback, which stops reading by returning false). */
  private stall(pause: boolean): void {
    const pipe = this.direct;
    if (pause) (pipe ?? this.src).pause();
    if (this.stalled) return;
    this.stalled = true;
    this.dst.once('drain', () => {
      this.stalled = false;
      (pipe ?? this.src).resume();
    });
  }

  /** Where the next read lands: the rest of the current buffer, or a new one. */
  private room(): Uint8Array {
    if (this.cur === undefined) {
      this.cur = Buffer.allocUnsafeSlow(this.first ? Math.min(FIRST_BUFFER_BYTES, this.size) : this.size);
      this.first = false;
      this.at = 0;
      this.sent = 0;
    }
    return this.cur.subarray(this.at);
  }

  /** `n` bytes landed at {@link at}; false stops reading (a write asked to wait). */
  private landed(n: number): boolean {
    const cur = this.cur as Buffer;
    this.bytes += n;
    this.onData(cur.subarray(this.at, this.at + n));
    this.at += n;
    if (this.at < cur.length) {
      this.startTimer();
      return true;
    }
    if (this.flushDirect()) return true;
    this.stall(false);
    return false;
  }

  /**
   * Writes what landed and was not written yet: a full buffer moves as it
   * is, anything else is copied out. Only a full buffer is ever given away
   * or reused, which happens in a read's callback: the handle's next read
   * goes where {@link room} says, never into memory that moved.
   */
  private flushDirect(): boolean {
    this.stopTimer();
    const cur = this.cur;
    if (cur === undefined || this.at === this.sent || this.dst.destroyed || this.dst.writableEnded) return true;
    if (this.sent === 0 && this.at === cur.length) {
      this.cur = undefined;
      return this.dst.write(handOver(cur));
    }
    const out = Buffer.allocUnsafeSlow(this.at - this.sent);
    out.set(cur.subarray(this.sent, this.at));
    this.sent = this.at;
    // Every byte of it copied out: the next reads may fill it again.
    if (this.at === cur.length) this.at = this.sent = 0;
    return this.dst.write(handOver(out));
  }

  private startTimer(): void {
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!(this.direct ? this.flushDirect() : this.flush())) this.stall(true);
    }, GATHER_MS);
    this.timer.unref();
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
    this.startTimer();
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
