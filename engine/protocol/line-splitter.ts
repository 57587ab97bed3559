/**
 * Newline-delimited messages out of a byte stream (MCP's stdio framing), in
 * time linear in the bytes: the pieces of an unfinished line are kept as
 * they came and joined once, when its newline arrives. (The SDK's
 * `ReadBuffer` concatenates its whole buffer with every chunk, so a 50 MB
 * message read in 64 KiB chunks copies about 20 GB.) A line longer than the
 * bound is reported once and its bytes dropped up to its newline, so memory
 * stays bounded whatever the peer sends; a line past a smaller spill size
 * can go elsewhere (a file) as it arrives.
 */

const NEWLINE = 0x0a;
const CR = 0x0d;
const EMPTY = Buffer.alloc(0);

/** Where the rest of a line past the spill size goes (a file, say), instead of memory. */
export interface LineSpill {
  /** More bytes of the line, in order (the first call gets what was held). */
  write(piece: Buffer): void;
  /** The line ended. */
  end(): void;
  /** The line passed the bound: what was written is worthless. */
  discard(): void;
}

/** What {@link LineSplitter.push} reports. */
export interface LineSink {
  /** One complete line, without its `\n` (and without a `\r` before it). */
  line(bytes: Buffer): void;
  /** A line passed the bound; its bytes are dropped up to its newline. */
  oversized(): void;
  /**
   * Bytes of an oversized line as they are dropped, from its start when it was held in memory (not
   * when it was spilled: those went to the spill); `end` (with no bytes) when its newline came.
   */
  dropped?(piece: Buffer, end: boolean): void;
  /** A line passed the spill size: where the rest of it goes. Without it, lines are held up to the bound. */
  spill?(): LineSpill;
}

/**
 * Splits a byte stream into lines of at most `maxLineBytes` bytes; a line
 * longer than `spillBytes` goes to the sink's spill (when it has one)
 * rather than memory. A spilled line keeps its `\r`, if it has one.
 */
export class LineSplitter {
  private readonly maxLineBytes: number;
  private readonly spillBytes: number;
  private parts: Buffer[] = [];
  private bytes = 0;
  private lineBytes = 0;
  private spill: LineSpill | undefined;
  private skipping = false;

  constructor(maxLineBytes: number, spillBytes = Number.POSITIVE_INFINITY) {
    this.maxLineBytes = maxLineBytes;
    this.spillBytes = spillBytes;
  }

  /** Bytes of the unfinished line held in memory now. */
  get pendingBytes(): number {
    return this.bytes;
  }

  /** Feeds one chunk; `sink` hears of every line it completes, in order. */
  push(chunk: Buffer, sink: LineSink): void {
    let rest = chunk;
    while (rest.length > 0) {
      const nl = rest.indexOf(NEWLINE);
      const piece = nl === -1 ? rest : rest.subarray(0, nl);
      if (!this.skipping) this.take(piece, sink);
      else sink.dropped?.(piece, false);
      if (nl === -1) return;
      rest = rest.subarray(nl + 1);
      if (this.skipping) {
        this.skipping = false;
        sink.dropped?.(EMPTY, true);
        continue;
      }
      const spill = this.spill;
      if (spill) {
        this.spill = undefined;
        this.lineBytes = 0;
        spill.end();
        continue;
      }
      const parts = this.parts;
      let line = parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, this.bytes);
      this.clear();
      if (line.length > 0 && line[line.length - 1] === CR) line = line.subarray(0, -1);
      sink.line(line);
    }
  }

  private take(piece: Buffer, sink: LineSink): void {
    if (this.lineBytes + piece.length > this.maxLineBytes) {
      // The line's start (held, when it was not spilled) goes to `dropped` too: it may name what the line is.
      const held = this.parts;
      this.clear();
      this.skipping = true;
      sink.oversized();
      for (const p of held) sink.dropped?.(p, false);
      sink.dropped?.(piece, false);
      return;
    }
    this.lineBytes += piece.length;
    if (this.spill) {
      this.spill.write(piece);
    } else if (this.lineBytes > this.spillBytes && sink.spill) {
      const spill = sink.spill();
      for (const p of this.parts) spill.write(p);
      spill.write(piece);
      this.parts = [];
      this.bytes = 0;
      this.spill = spill;
    } else if (piece.length > 0) {
      this.parts.push(piece);
      this.bytes += piece.length;
    }
  }

  /** Drops the unfinished line (a spill of it is discarded). */
  clear(): void {
    this.parts = [];
    this.bytes = 0;
    this.lineBytes = 0;
    this.spill?.discard();
    this.spill = undefined;
  }
}
