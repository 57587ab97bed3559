/**
 * Output of a self-paginating tool (the built-in `read`): its page is bounded
 * by the tool, so it is returned as is, with no file, artifact or truncation
 * (retaining every artifact read as a new one would be waste). A hard bound
 * stops a misbehaving tool: passing it is ERESOURCELIMIT, never a cut.
 */
import { linesOfString } from '../../store/lines.js';
import { ResourceLimitError } from '../protocol/errors.js';

/** Largest page a self-paginating tool may return: the read tool's page bound plus its metadata line. */
export const MAX_PAGE_OUTPUT_BYTES = 2 * 1024 * 1024 + 4096;

/** Collects a self-paginating tool's single output in memory, bounded; its bytes stay available until the call is done (`Engine.readBytes`). */
export class PageCapture {
  private readonly parts: Uint8Array[] = [];
  private total = 0;

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

  stats(): Array<{ name: string; bytes: number; lines: number }> {
    return [{ name: 'page', bytes: this.total, lines: 0 }];
  }

  /** The page's bytes, exactly as the tool produced them (an artifact page: as stored). */
  bytes(): Buffer {
    if (this.parts.length !== 1) this.parts.splice(0, this.parts.length, Buffer.concat(this.parts, this.total));
    const b = this.parts[0] ?? new Uint8Array(0);
    return Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  }

  /** The page as text (invalid UTF-8 as U+FFFD); `bytes` is the UTF-8 size of that text. */
  text(): { text: string; bytes: number; lines: number } {
    const text = this.bytes().toString('utf8');
    return { text, bytes: Buffer.byteLength(text, 'utf8'), lines: linesOfString(text) };
  }

  discard(): void {
    this.parts.length = 0;
    this.total = 0;
  }
}
