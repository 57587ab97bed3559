/** `Engine.read()`: the built-in `read` tool called through the ordinary call path, as a model's call runs, its result turned into a page. */
import type { CallOptions } from './call/call-types.js';
import { deserializeError, ProtocolError, ToolFailedError } from './protocol/errors.js';
import type { Attachment } from './protocol/messages.js';
import type { TerminalResult } from './result.js';

/** The registry name of the built-in reader. */
export const READ_TOOL = 'read';

/** Options of `Engine.read`: paging, plus the ordinary call options (session, signal, timeout). */
export interface ReadOptions extends Omit<CallOptions, 'callId'> {
  /** Zero-based line to start at. @default 0 */
  offset?: number;
  /** Lines in the page, 1 to 2000. @default 2000 */
  limit?: number;
  /** Artifacts only: bytes into the line at `offset` where the page starts (a page's `nextByteOffset`). @default 0 */
  byteOffset?: number;
}

/** What a page is, besides its content (see {@link ReadResult}). */
export interface ReadPageInfo {
  /** Zero-based offset of the first line, as requested. */
  offset: number;
  /** Lines in `content`, a line it holds only part of included. */
  lines: number;
  /** Lines in the whole artifact, stream, file or listing. */
  totalLines: number;
  /** Offset of the next page, or null at the end. */
  nextOffset: number | null;
  /** Non-null when the page stopped inside line `nextOffset`: pass it as `byteOffset` with `offset: nextOffset`. */
  nextByteOffset: number | null;
  /** True when the page's stored bytes are not valid UTF-8; `content` shows U+FFFD for them. */
  lossy: boolean;
  /** The image or PDF read, when the file was one. */
  attachments?: Attachment[];
}

/** One page, as `Engine.read` and `sluice read --json` return it. */
export interface ReadResult extends ReadPageInfo {
  /** An artifact's lines as stored, as text; a file's lines numbered; a directory's entries; for an image or PDF a short note. */
  content: string;
}

/** One page as its bytes, as `Engine.readBytes` returns it (`sluice read --raw`). */
export interface ReadBytesResult extends ReadPageInfo {
  /** The page's bytes: for an artifact, exactly as stored. */
  bytes: Buffer;
}

/** The `read` tool's arguments for `filePath` and the paging options (absent ones left out, so the tool's defaults apply). */
export function readArgs(filePath: string, options: ReadOptions = {}): Record<string, unknown> {
  const args: Record<string, unknown> = { filePath };
  if (options.offset !== undefined) args.offset = options.offset;
  if (options.limit !== undefined) args.limit = options.limit;
  if (options.byteOffset !== undefined) args.byteOffset = options.byteOffset;
  return args;
}

/** The call options in `options` (everything but paging). */
export function readCallOptions(options: ReadOptions = {}): CallOptions {
  const { offset: _o, limit: _l, byteOffset: _b, ...call } = options;
  return call;
}

function count(metadata: Record<string, unknown>, key: string): number {
  const v = metadata[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new ProtocolError(`the read tool's metadata has no valid ${key} (got ${JSON.stringify(v)})`);
  }
  return v;
}

/** The page of a finished `read` call, without the continuation line of the model view; a failed call throws its typed error. */
export function readResultOf(result: TerminalResult): ReadResult {
  if (result.status !== 'success') {
    throw result.error
      ? deserializeError(result.error)
      : new ToolFailedError(`read ${result.status} without an error`, { status: result.status });
  }
  if (result.output?.kind !== 'page') {
    throw new ProtocolError(`${result.tool} is not a self-paginating reader (output ${result.output?.kind ?? 'none'})`);
  }
  const model = Buffer.from(result.model, 'utf8');
  const content = model.subarray(0, result.output.bytes).toString('utf8');
  const m = result.metadata;
  const next = m.nextOffset;
  if (next !== null && (typeof next !== 'number' || !Number.isSafeInteger(next) || next < 0)) {
    throw new ProtocolError(`the read tool's metadata has no valid nextOffset (got ${JSON.stringify(next)})`);
  }
  const nextByte = m.nextByteOffset ?? null;
  if (nextByte !== null && (typeof nextByte !== 'number' || !Number.isSafeInteger(nextByte) || nextByte < 0)) {
    throw new ProtocolError(`the read tool's metadata has no valid nextByteOffset (got ${JSON.stringify(nextByte)})`);
  }
  const page: ReadResult = {
    content,
    offset: count(m, 'offset'),
    lines: count(m, 'lines'),
    totalLines: count(m, 'totalLines'),
    nextOffset: next,
    nextByteOffset: nextByte,
    lossy: m.lossy === true,
  };
  if (result.attachments.length > 0) page.attachments = result.attachments;
  return page;
}
