/**
 * What a page read takes and gives: its bounds, its options (checked and
 * defaulted by {@link pageOptions}) and the shape of a page.
 */
import { BadArgumentsError } from '../engine/protocol/errors.js';

/** Lines in a page when no limit is given, and the largest limit accepted. */
export const MAX_PAGE_LINES = 2000;
/**
 * The largest page, in UTF-8 bytes of its text (and so of its stored bytes,
 * which are never more). Whole lines that pass it are an error, never a cut
 * page; a single line that passes it is returned in pieces.
 */
export const MAX_PAGE_BYTES = 2 * 1024 * 1024;

/** Options of {@link readPage}. */
export interface ReadPageOptions {
  /** Zero-based index of the first line of the page; a non-negative integer. @default 0 */
  offset?: number;
  /** Most lines in the page; an integer from 1 to {@link MAX_PAGE_LINES}. @default 2000 */
  limit?: number;
  /**
   * Bytes into line `offset` where the page starts: a `nextByteOffset` a
   * previous page gave, to continue a line longer than a page. Must lie
   * inside the line (less than its length, its `\n` included). @default 0
   */
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
  /**
   * Non-null when the page stops inside line `nextOffset` (a line longer
   * than {@link MAX_PAGE_BYTES}): the `byteOffset` that continues it.
   */
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

/**
 * Checks and defaults paging options. Throws {@link BadArgumentsError} (EBADARGS)
 * quoting the bad value: offset and byteOffset must be non-negative integers,
 * limit an integer from 1 to {@link MAX_PAGE_LINES}.
 */
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
