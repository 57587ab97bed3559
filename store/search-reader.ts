/**
 * The reads of a search pass (store/search.ts): a blob read forward in
 * fixed reads, several under way while one is searched, each into a buffer
 * of its own after room for the partial line the pass carries over from the
 * read before. A read's place in the blob never depends on what the pass
 * carries, so reads are submitted ahead and the reading thread always has
 * the next one queued: a read that waits for the pass to ask for it leaves
 * the thread idle for two wake-ups (of a thread of libuv's pool, then of the
 * pass), which on a virtual machine cost about what copying 1 MiB from the
 * page cache does (docs/benchmarks.md, "Reads and search").
 */
import type { BlobHandle } from './blob-handle.js';

/** One read of the pass, with the bytes carried in front of it. */
export interface ReadChunk {
  /** The buffer: `buf[start, end)` is the carried bytes, then the read's. */
  readonly buf: Buffer;
  /** Where the carried bytes start (the read's start when nothing was carried). */
  readonly start: number;
  readonly end: number;
  /** Blob offset of `buf[0]`. */
  readonly base: number;
  /** The read ended at the blob's end (or the blob gave no more bytes). */
  readonly atEof: boolean;
}

/** How the reads of a pass are sized. */
export interface ReadAheadShape {
  /** Bytes of one read. */
  readBytes: number;
  /** Most bytes carried in front of a read. */
  carryBytes: number;
  /** Reads under way while one is searched. */
  depth: number;
}

/** Buffers kept between pages of one thread's searches, until {@link KEEP_BUFFERS_MS} pass unused. */
let kept: { size: number; buffers: Buffer[] } | undefined;
let dropKept: NodeJS.Timeout | undefined;
/** Following a search page by page reuses its buffers: fresh ones cost page faults and garbage collections. */
const KEEP_BUFFERS_MS = 2000;

/** `count` buffers of `size` bytes: the kept ones when they are the full size of a pass that needs them all. */
function takeBuffers(count: number, size: number, full: boolean): Buffer[] {
  const k = kept;
  if (full && k !== undefined && k.size === size && k.buffers.length === count) {
    kept = undefined;
    return k.buffers;
  }
  return Array.from({ length: count }, () => Buffer.allocUnsafe(size));
}

function returnBuffers(size: number, buffers: Buffer[]): void {
  kept = { size, buffers };
  clearTimeout(dropKept);
  dropKept = setTimeout(() => {
    kept = undefined;
  }, KEEP_BUFFERS_MS);
  dropKept.unref();
}

/**
 * The blob from `from` to `bytes`, read by read. Call {@link next} for each
 * read in turn, then {@link close} (which waits for the reads still under
 * way: the blob may be closed only after it).
 */
export class ReadAhead {
  private readonly buffers: Buffer[];
  private readonly size: number;
  /** Whether the buffers are of the full shape (kept for the next pass) or sized to a short pass. */
  private readonly full: boolean;
  /** Bytes in front of each read for the carried ones. */
  private readonly room: number;
  /** The read of each buffer, when one was submitted into it; its count of bytes. */
  private readonly pending: Array<Promise<number> | undefined>;
  /** The next read to hand out, and the next to submit. */
  private taken = 0;
  private submitted = 0;
  private current: ReadChunk | undefined;

  constructor(
    private readonly handle: BlobHandle,
    private readonly from: number,
    private readonly bytes: number,
    private readonly shape: ReadAheadShape,
  ) {
    // A pass shorter than the reads (a small blob, the end of one) needs fewer and smaller buffers.
    const left = Math.max(0, bytes - from);
    const reads = Math.max(1, Math.ceil(left / shape.readBytes));
    this.full = reads > shape.depth;
    const count = Math.min(shape.depth + 1, reads);
    // One read carries nothing in: no room in front of it.
    this.room = reads > 1 ? shape.carryBytes : 0;
    this.size = reads > 1 ? shape.carryBytes + shape.readBytes : left;
    this.buffers = takeBuffers(count, this.size, this.full);
    this.pending = this.buffers.map(() => undefined);
    for (let i = 0; i < shape.depth; i++) this.submit();
  }

  private slot(n: number): number {
    return n % this.buffers.length;
  }

  /** Submits the next read, unless it would start past the blob's end (the first is always submitted). */
  private submit(): void {
    const position = this.from + this.submitted * this.shape.readBytes;
    if (position >= this.bytes && this.submitted > 0) return;
    const s = this.slot(this.submitted++);
    const read = this.fill(this.buffers[s] as Buffer, position);
    // Awaited by next() or close(); a failure is reported there, not as an unhandled rejection.
    read.catch(() => {});
    this.pending[s] = read;
  }

  /** One whole read: a short one is continued, so every read starts where the one before it ended. */
  private async fill(buf: Buffer, position: number): Promise<number> {
    const want = Math.min(this.shape.readBytes, this.bytes - position);
    let got = 0;
    while (got < want) {
      const { bytesRead } = await this.handle.read(buf, this.room + got, want - got, position + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return got;
  }

  /**
   * The next read, with `carry` (bytes of the chunk before, at most
   * `carryBytes`) copied in front of it. The last read is the one `atEof`.
   */
  async next(carry = 0): Promise<ReadChunk> {
    const prev = this.current;
    if (carry > this.room || carry > (prev ? prev.end - prev.start : 0)) {
      throw new RangeError(`cannot carry ${carry} bytes`);
    }
    const s = this.slot(this.taken);
    const read = this.pending[s];
    if (read === undefined || prev?.atEof) throw new RangeError('no read past the end of the blob');
    const n = await read;
    this.pending[s] = undefined;
    const position = this.from + this.taken * this.shape.readBytes;
    this.taken++;
    const buf = this.buffers[s] as Buffer;
    const start = this.room - carry;
    if (prev && carry > 0) prev.buf.copy(buf, start, prev.end - carry, prev.end);
    // The buffer before is free now: the read after the last one under way goes into it.
    this.submit();
    const end = this.room + n;
    this.current = {
      buf,
      start,
      end,
      base: position - this.room,
      atEof: n === 0 || position + n >= this.bytes || n < this.shape.readBytes,
    };
    return this.current;
  }

  /** Waits for the reads under way (their errors are dropped) and keeps the buffers for the next pass. */
  async close(): Promise<void> {
    await Promise.all(this.pending.map((p) => p?.catch(() => {})));
    if (this.full) returnBuffers(this.size, this.buffers);
  }
}
