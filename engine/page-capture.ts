/**
 * Output of a self-paginating tool (the built-in `read`): its page is already
 * bounded by the tool, so it is returned as it is. No capture file, no
 * artifact, no preview truncation: retaining every artifact read as a new
 * artifact would be waste. The hard bound below stops a misbehaving tool from
 * growing it; passing it fails the call with ERESOURCELIMIT (never a cut).
 */
import { linesOfString } from '../store/lines.js';
import { ResourceLimitError } from './protocol/errors.js';

/** Largest page a self-paginating tool may return (the read tool's own 2 MiB page bound plus its metadata line). */
export const MAX_PAGE_OUTPUT_BYTES = 2 * 1024 * 1024 + 4096;

/** Collects the single output of a self-paginating tool in memory, bounded. */
export class PageCapture {
  private readonly parts: Uint8Array[] = [];
  private total = 0;

  /** Accepts a chunk (channel index is always 0: self-paginating tools have single output). */
  /** Whether accepted chunks are kept after they are written: yes, they make up the page. */
  readonly keepsChunks = true;

  accept(_index: number, bytes: Uint8Array): Promise<void> {
    if (this.total + bytes.length > MAX_PAGE_OUTPUT_BYTES) {
      throw new ResourceLimitError(
        `a page passed ${MAX_PAGE_OUTPUT_BYTES} bytes; self-paginating tools must bound their pages`,
      );
    }
    this.parts.push(bytes);
    this.total += bytes.length;
    return Promise.resolve();
  }

  /** Bytes so far. */
  stats(): Array<{ name: string; bytes: number; lines: number }> {
    return [{ name: 'page', bytes: this.total, lines: 0 }];
  }

  /** The page text. */
  text(): { text: string; bytes: number; lines: number } {
    const text = Buffer.concat(this.parts).toString('utf8');
    return { text, bytes: this.total, lines: linesOfString(text) };
  }

  /** Drops the page. */
  discard(): void {
    this.parts.length = 0;
    this.total = 0;
  }
}
