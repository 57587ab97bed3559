/**
 * Lines of a byte stream for `sluice batch`, never holding more than one line
 * of at most `maxBytes`: a longer line is skipped as it streams past and
 * reported as an {@link OversizeLine}, so a runaway line cannot exhaust memory.
 */
import { OversizeLine } from './items.js';

/** Default bound on one batch line (a call's arguments included). */
export const MAX_BATCH_LINE_BYTES = 8 * 1024 * 1024;

/** Yields the lines of `source` (a trailing `\r` removed). */
export async function* lines(
  source: AsyncIterable<Uint8Array | string>,
  maxBytes = MAX_BATCH_LINE_BYTES,
): AsyncGenerator<string | OversizeLine, void, undefined> {
  let parts: Buffer[] = [];
  let size = 0;
  /** Bytes of the current line when it is past the bound (its bytes are dropped). */
  let oversize = 0;
  const take = (): string | OversizeLine => {
    if (oversize > 0) {
      const r = new OversizeLine(oversize, maxBytes);
      oversize = 0;
      return r;
    }
    const line = Buffer.concat(parts, size).toString('utf8');
    parts = [];
    size = 0;
    return line.endsWith('\r') ? line.slice(0, -1) : line;
  };
  const add = (b: Buffer) => {
    if (oversize > 0) oversize += b.length;
    else if (size + b.length > maxBytes) {
      oversize = size + b.length;
      parts = [];
      size = 0;
    } else if (b.length > 0) {
      parts.push(b);
      size += b.length;
    }
  };
  for await (const chunk of source) {
    const buf =
      typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length);
    let start = 0;
    for (;;) {
      const nl = buf.indexOf(10, start);
      if (nl === -1) break;
      add(buf.subarray(start, nl));
      yield take();
      start = nl + 1;
    }
    // The rest is copied: the stream may reuse the chunk's memory.
    if (start < buf.length) add(Buffer.from(buf.subarray(start)));
  }
  if (size > 0 || oversize > 0) yield take();
}
