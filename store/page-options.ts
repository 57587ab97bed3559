/** What a page read takes and gives. */
import { BadArgumentsError } from '../engine/protocol/errors.js';

/** Lines in a page when no limit is given, and the largest limit accepted. */
export const MAX_PAGE_LINES = 2000;
/** The largest page in UTF-8 bytes: whole lines past it are an error, a single longer line comes in pieces. */
export const MAX_PAGE_BYTES = 2 * 1024 * 1024;

/** Options of {@link readPage}. */
export interface ReadPageOptions {
  /** Zero-based index of the first line of the page; a non-negative integer. @default 0 */
  offset?: number;
  /** Most lines in the page; an integer from 1 to {@link MAX_PAGE_LINES}. @default 2000 */
  limit?: number;
  /** A previous page's `nextByteOffset`, to continue a line longer than a page; inside the line. @default 0 */
  byteOffset?: number;
}

/** What a page is, besides its content. */
export interface PageInfo {
  /** The zero-based offset of the first line, as requested. */
  offset: number;
  /** Lines the page holds, a line it holds only part of included. */
  lines: number;
  /** Lines in the whole artifact (or stream). */
  totalLines: number;
  /** Offset of the next page, or null when this page reaches the end. */
  nextOffset: number | null;
  /** The `byteOffset` that continues line `nextOffset` when the page stops inside it. */
  nextByteOffset: number | null;
  /** True when the stored bytes of the page are not valid UTF-8 (its text shows U+FFFD for them). */
  lossy: boolean;
  /** The digest named by the URI (for a stream URI, the manifest's). */
  digest: string;
  /** The stream named by the URI, when it has one. */
  stream?: string;
  /** The digest of the blob the lines come from: the stream's blob for a stream URI, else `digest`. */
  blob: string;
}

/** One page of an artifact, as text. */
export interface ReadPage extends PageInfo {
  /** The page's stored bytes as text, `\n` (and any `\r`) included; empty past the end. */
  content: string;
}

/** One page of an artifact, as its stored bytes. */
export interface ReadPageBytes extends PageInfo {
  /** The page's bytes exactly as stored. */
  bytes: Buffer;
}

function quote(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (value === undefined) return 'undefined';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** @throws EBADARGS quoting the value: non-negative integer offsets, limit from 1 to {@link MAX_PAGE_LINES}. */
export function pageOptions(opts: ReadPageOptions = {}): { offset: number; limit: number; byteOffset: number } {
  const { offset = 0, limit = MAX_PAGE_LINES, byteOffset = 0 } = opts;
  if (!isCount(offset)) {
    throw new BadArgumentsError(
      `offset must be a non-negative integer (a zero-based line number), got ${quote(offset)}`,
      { offset },
    );
  }
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE_LINES) {
    throw new BadArgumentsError(`limit must be an integer from 1 to ${MAX_PAGE_LINES}, got ${quote(limit)}`, { limit });
  }
  if (!isCount(byteOffset)) {
    throw new BadArgumentsError(
      `byteOffset must be a non-negative integer (bytes into the line at offset), got ${quote(byteOffset)}`,
      { byteOffset },
    );
  }
  return { offset, limit, byteOffset };
}
