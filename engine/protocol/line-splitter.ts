/**
 * Newline-delimited messages out of a byte stream (MCP's stdio framing), in
 * time linear in the bytes: the pieces of an unfinished line are kept as
 * they came and joined once, when its newline arrives. (The SDK's
 * `ReadBuffer` concatenates its whole buffer with every chunk, so a 50 MB
 * message read in 64 KiB chunks copies about 20 GB.) A line longer than the
 * bound is reported once and its bytes dropped up to its newline, so memory
 * stays bounded whatever the peer sends.
 */

const NEWLINE = 0x0a;
const CR = 0x0d;

/** What {@link LineSplitter.push} reports. */
export interface LineSink {
  /** One complete line, without its `\n` (and without a `\r` before it). */
  line(bytes: Buffer): void;
  /** A line passed the bound; its bytes are dropped up to its newline. */
  oversized(): void;
}

/** Splits a byte stream into lines of at most `maxLineBytes` bytes. */
export class LineSplitter {
  private readonly maxLineBytes: number;
  private parts: Buffer[] = [];
  private bytes = 0;
  private skipping = false;

  constructor(maxLineBytes: number) {
    this.maxLineBytes = maxLineBytes;
  }

  /** Bytes of the unfinished line held now. */
  get pendingBytes(): number {
    return this.bytes;
  }

  /** Feeds one chunk; `sink` hears of every line it completes, in order. */
  push(chunk: Buffer, sink: LineSink): void {
    let rest = chunk;
    while (rest.length > 0) {
      const nl = rest.indexOf(NEWLINE);
      const piece = nl === -1 ? rest : rest.subarray(0, nl);
      if (!this.skipping) {
        if (this.bytes + piece.length > this.maxLineBytes) {
          this.clear();
          this.skipping = true;
          sink.oversized();
        } else if (piece.length > 0) {
          this.parts.push(piece);
          this.bytes += piece.length;
        }
      }
      if (nl === -1) return;
      rest = rest.subarray(nl + 1);
      if (this.skipping) {
        this.skipping = false;
        continue;
      }
      const parts = this.parts;
      let line = parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, this.bytes);
      this.clear();
      if (line.length > 0 && line[line.length - 1] === CR) line = line.subarray(0, -1);
      sink.line(line);
    }
  }

  /** Drops the unfinished line. */
  clear(): void {
    this.parts = [];
    this.bytes = 0;
  }
}
