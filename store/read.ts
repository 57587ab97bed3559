/**
 * Paged reads of artifacts: `artifact://<digest>` reads a blob as stored,
 * `artifact://<digest>/<stream>` reads one stream of a manifest.
 *
 * A page is whole lines (lines end at `\n`, see lines.ts), returned exactly as
 * stored, with continuation metadata. Its cost is O(page), not O(offset): a
 * large blob's cached line index gives a line start at most 64 KiB or 1024
 * lines before the page, so a read scans less than that before its page
 * begins. Pages split only at `\n`, so code points are never cut.
 */
import { StringDecoder } from 'node:string_decoder';
import {
  BadArgumentsError,
  IntegrityError,
  ResourceLimitError,
  UnknownStreamError,
} from '../engine/protocol/errors.js';
import { BLOB_START, findAnchor, type LineAnchor, wantsIndex } from './index-file.js';
import {
  isIndexUnavailable,
  markIndexUnavailable,
  openVerifiedBlob,
  rebuildIndex,
  type VerifiedBlob,
} from './integrity.js';
import { loadManifest } from './manifest-load.js';
import type { Store } from './store.js';
import { parseArtifactUri } from './uri.js';

/** Lines in a page when no limit is given, and the largest limit accepted. */
export const MAX_PAGE_LINES = 2000;
/** The largest page, in UTF-8 bytes of content; a larger page is an error, never truncated. */
export const MAX_PAGE_BYTES = 2 * 1024 * 1024;

/** Options of {@link readPage}. */
export interface ReadPageOptions {
  /** Zero-based index of the first line of the page; a non-negative integer. @default 0 */
  offset?: number;
  /** Most lines in the page; an integer from 1 to {@link MAX_PAGE_LINES}. @default 2000 */
  limit?: number;
}

/** One page of an artifact. */
export interface ReadPage {
  /** The lines of the page exactly as stored, `\n` (and any `\r`) included; empty past the end. */
  content: string;
  /** The zero-based offset of the first line, as requested. */
  offset: number;
  /** Lines in `content`. */
  lines: number;
  /** Lines in the whole artifact (or stream). */
  totalLines: number;
  /** Offset of the next page, or null when this page reaches the end. */
  nextOffset: number | null;
  /** The digest named by the URI (for a stream URI, the manifest's). */
  digest: string;
  /** The stream named by the URI, when it has one. */
  stream?: string;
  /** The digest of the blob the lines come from: the stream's blob for a stream URI, else `digest`. */
  blob: string;
}

/** Read size while looking for and collecting a page. */
const PAGE_CHUNK = 64 * 1024;
const LF = 0x0a;

function quote(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (value === undefined) return 'undefined';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * Checks and defaults paging options. Throws {@link BadArgumentsError} (EBADARGS)
 * quoting the bad value: offset must be a non-negative integer, limit an
 * integer from 1 to {@link MAX_PAGE_LINES}.
 */
export function pageOptions(opts: ReadPageOptions = {}): { offset: number; limit: number } {
  const { offset = 0, limit = MAX_PAGE_LINES } = opts;
  if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0) {
    throw new BadArgumentsError(
      `offset must be a non-negative integer (a zero-based line number), got ${quote(offset)}`,
      {
        offset,
      },
    );
  }
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE_LINES) {
    throw new BadArgumentsError(`limit must be an integer from 1 to ${MAX_PAGE_LINES}, got ${quote(limit)}`, { limit });
  }
  return { offset, limit };
}

function tooLarge(bytes: number, offset: number, limit: number): ResourceLimitError {
  return new ResourceLimitError(
    `the page at offset ${offset} with limit ${limit} is larger than ${MAX_PAGE_BYTES} bytes; read it with a smaller limit`,
    { offset, limit, maxBytes: MAX_PAGE_BYTES, bytes },
  );
}

/** The line start to begin scanning from: the blob start, or an index entry at or before `offset`. */
async function anchorFor(store: Store, blob: VerifiedBlob, offset: number): Promise<LineAnchor> {
  if (offset === 0 || !wantsIndex(blob.bytes)) return BLOB_START;
  const args = [store, blob.digest, blob.handle, blob.bytes, blob.lines, offset] as const;
  const found = await findAnchor(...args);
  if (found) return found;
  // A missing or damaged index is rebuilt once; if that fails too, scanning from the start is slow but right,
  // and later reads go straight to scanning rather than retrying a full rebuild every time.
  if (isIndexUnavailable(store, blob.digest)) return BLOB_START;
  if (await rebuildIndex(store, blob.digest, blob.handle, blob.bytes)) {
    const again = await findAnchor(...args);
    if (again) return again;
  }
  markIndexUnavailable(store, blob.digest);
  return BLOB_START;
}

/**
 * Collects `expected` lines starting at line `offset`, scanning forward from
 * `anchor`. Holds at most {@link MAX_PAGE_BYTES} of content plus one read buffer.
 */
async function collect(
  blob: VerifiedBlob,
  anchor: LineAnchor,
  offset: number,
  limit: number,
  expected: number,
): Promise<string> {
  const buf = Buffer.allocUnsafe(PAGE_CHUNK);
  const decoder = new StringDecoder('utf8');
  const parts: string[] = [];
  let position = anchor.byte;
  let line = anchor.line;
  let pageBytes = 0;
  let got = 0;
  let lastByte = LF;
  while (got < expected) {
    const { bytesRead } = await blob.handle.read(buf, 0, PAGE_CHUNK, position);
    if (bytesRead === 0) break;
    const view = buf.subarray(0, bytesRead);
    position += bytesRead;
    let start = 0;
    // Skip to the page's first line: less than 1024 lines or 64 KiB when an index anchor was found.
    while (line < offset && start < bytesRead) {
      const nl = view.indexOf(LF, start);
      if (nl === -1) start = bytesRead;
      else {
        line++;
        start = nl + 1;
      }
    }
    if (line < offset || start === bytesRead) continue;
    let end = start;
    while (got < expected) {
      const nl = view.indexOf(LF, end);
      if (nl === -1) {
        end = bytesRead;
        break;
      }
      got++;
      end = nl + 1;
    }
    pageBytes += end - start;
    if (pageBytes > MAX_PAGE_BYTES) throw tooLarge(pageBytes, offset, limit);
    parts.push(decoder.write(view.subarray(start, end)));
    lastByte = view[end - 1] ?? LF;
  }
  // The last line of a blob without a final `\n` ends at end of file.
  if (got < expected && pageBytes > 0 && lastByte !== LF) got++;
  if (got !== expected) {
    throw new IntegrityError(`artifact ${blob.digest} changed while it was being read; read it again`, {
      digest: blob.digest,
    });
  }
  parts.push(decoder.end());
  const content = parts.join('');
  // Invalid UTF-8 in stored bytes decodes to U+FFFD (3 bytes): the bound is on the content returned.
  const contentBytes = Buffer.byteLength(content, 'utf8');
  if (contentBytes > MAX_PAGE_BYTES) throw tooLarge(contentBytes, offset, limit);
  return content;
}

/** Reads a page of the verified blob `digest`. */
async function readBlobPage(
  store: Store,
  digest: string,
  offset: number,
  limit: number,
  expectedBytes?: number,
): Promise<{ content: string; lines: number; totalLines: number }> {
  const blob = await openVerifiedBlob(store, digest);
  try {
    if (expectedBytes !== undefined && blob.bytes !== expectedBytes) {
      throw new IntegrityError(
        `artifact ${digest} has ${blob.bytes} bytes but its manifest records ${expectedBytes}; the manifest does not describe it`,
        { digest, bytes: blob.bytes, expected: expectedBytes },
      );
    }
    const totalLines = blob.lines;
    if (offset >= totalLines) return { content: '', lines: 0, totalLines };
    const expected = Math.min(limit, totalLines - offset);
    const anchor = await anchorFor(store, blob, offset);
    const content = await collect(blob, anchor, offset, limit, expected);
    return { content, lines: expected, totalLines };
  } finally {
    await blob.close();
  }
}

/**
 * Reads one page of the artifact at `uri`.
 *
 * - `artifact://<digest>` reads the blob as stored (a manifest reads as its JSON).
 * - `artifact://<digest>/<stream>` reads that stream of the manifest `<digest>`.
 *
 * The first read of a blob through a given {@link Store} hashes all of it.
 *
 * @throws BadUriError (EBADURI) for anything but an exact artifact URI.
 * @throws BadArgumentsError (EBADARGS) for a bad offset or limit (see {@link pageOptions}).
 * @throws NotFoundError (ENOTFOUND) when the blob (or the stream's blob) is absent.
 * @throws IntegrityError (EINTEGRITY) when stored content does not match its digest.
 * @throws NotManifestError (ENOTMANIFEST) for a stream suffix on a blob that is not a manifest.
 * @throws UnknownStreamError (EUNKNOWNSTREAM) for a stream the manifest does not declare.
 * @throws ResourceLimitError (ERESOURCELIMIT) when the page is over {@link MAX_PAGE_BYTES}.
 */
export async function readPage(store: Store, uri: string, opts?: ReadPageOptions): Promise<ReadPage> {
  const { digest, stream } = parseArtifactUri(uri);
  const { offset, limit } = pageOptions(opts);
  let blob = digest;
  let expectedBytes: number | undefined;
  if (stream !== undefined) {
    const manifest = await loadManifest(store, digest);
    const entry = manifest.streams.find((s) => s.name === stream);
    if (!entry) {
      const declared = manifest.streams.map((s) => s.name).join(', ') || '(none)';
      throw new UnknownStreamError(
        `manifest ${digest} has no stream ${JSON.stringify(stream)}; its streams are: ${declared}`,
        { digest, stream, streams: manifest.streams.map((s) => s.name) },
      );
    }
    blob = entry.digest;
    expectedBytes = entry.bytes;
  }
  const page = await readBlobPage(store, blob, offset, limit, expectedBytes);
  const next = offset + page.lines;
  return {
    content: page.content,
    offset,
    lines: page.lines,
    totalLines: page.totalLines,
    nextOffset: page.lines > 0 && next < page.totalLines ? next : null,
    digest,
    ...(stream === undefined ? {} : { stream }),
    blob,
  };
}
