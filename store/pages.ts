/**
 * Paged reads of `artifact://<digest>` (a blob as stored) and
 * `artifact://<digest>/<stream>` (a manifest's stream), costing O(page), not
 * O(offset): a large blob's line index gives a line start at most 64 KiB or
 * 1024 lines before the page. A line longer than a page is read in pieces
 * cut on code-point boundaries; the index has an entry after every long
 * line, so reads deep inside one need not scan it.
 */
import { isUtf8 } from 'node:buffer';
import {
  BadArgumentsError,
  IntegrityError,
  ResourceLimitError,
  UnknownStreamError,
} from '../engine/protocol/errors.js';
import { decodedSize, textBudgetCut } from '../engine/protocol/text.js';
import { BLOB_START, findAnchor, INDEX_SCAN_BOUND, type IndexedAnchor, wantsIndex } from './index-file.js';
import {
  isIndexUnavailable,
  markIndexUnavailable,
  openVerifiedBlob,
  rebuildIndex,
  type VerifiedBlob,
} from './integrity.js';
import { loadManifest } from './manifest-load.js';
import {
  MAX_PAGE_BYTES,
  pageOptions,
  type ReadPage,
  type ReadPageBytes,
  type ReadPageOptions,
} from './page-options.js';
import type { Store } from './store.js';
import { parseArtifactUri } from './uri.js';

export * from './page-options.js';

/** Read size while looking for and collecting a page. */
const PAGE_CHUNK = 64 * 1024;
const LF = 0x0a;

function tooLarge(bytes: number, offset: number, limit: number, fits: number): ResourceLimitError {
  return new ResourceLimitError(
    `the page at offset ${offset} with limit ${limit} is larger than ${MAX_PAGE_BYTES} bytes; its first ${fits} line${fits === 1 ? '' : 's'} fit: read with limit=${fits}`,
    { offset, limit, maxBytes: MAX_PAGE_BYTES, bytes, fits },
  );
}

/** The line start to begin scanning from: the blob start, or an index entry at or before `offset` (and the entry after it). */
async function anchorFor(store: Store, blob: VerifiedBlob, offset: number): Promise<IndexedAnchor> {
  if (!wantsIndex(blob.bytes)) return { anchor: BLOB_START, indexed: false };
  const args = [store, blob.digest, blob.handle, blob.bytes, blob.lines, offset] as const;
  const found = await findAnchor(...args);
  if (found) return found;
  // A missing or damaged index is rebuilt once; if that fails too, scanning from the start is slow but right,
  // and later reads go straight to scanning rather than retrying a full rebuild every time.
  if (isIndexUnavailable(store, blob.digest)) return { anchor: BLOB_START, indexed: false };
  if (await rebuildIndex(store, blob.digest, blob.handle, blob.bytes)) {
    const again = await findAnchor(...args);
    if (again) return again;
  }
  markIndexUnavailable(store, blob.digest);
  return { anchor: BLOB_START, indexed: false };
}

/** Where line `offset` starts, scanning forward from `anchor` (less than 64 KiB or 1024 lines with an index). */
async function lineStart(blob: VerifiedBlob, anchor: { line: number; byte: number }, offset: number): Promise<number> {
  if (anchor.line === offset) return anchor.byte;
  const buf = Buffer.allocUnsafe(PAGE_CHUNK);
  let position = anchor.byte;
  let line = anchor.line;
  for (;;) {
    const { bytesRead } = await blob.handle.read(buf, 0, PAGE_CHUNK, position);
    if (bytesRead === 0) throw changed(blob);
    let start = 0;
    while (start < bytesRead) {
      const nl = buf.indexOf(LF, start);
      if (nl === -1 || nl >= bytesRead) break;
      line++;
      start = nl + 1;
      if (line === offset) return position + start;
    }
    position += bytesRead;
  }
}

function changed(blob: VerifiedBlob): IntegrityError {
  return new IntegrityError(`artifact ${blob.digest} changed while it was being read; read it again`, {
    digest: blob.digest,
  });
}

function pastLine(offset: number, byteOffset: number, length: number): BadArgumentsError {
  return new BadArgumentsError(
    `byteOffset ${byteOffset} is past the end of line ${offset}, which has ${length} bytes; use a nextByteOffset a page gave`,
    { offset, byteOffset, lineBytes: length },
  );
}

// Past INDEX_SCAN_BOUND with an index, the line's length comes from the entry after it.
async function checkByteOffset(
  blob: VerifiedBlob,
  found: IndexedAnchor,
  offset: number,
  start: number,
  byteOffset: number,
): Promise<void> {
  const lastLine = offset === blob.lines - 1;
  if (found.indexed && byteOffset >= INDEX_SCAN_BOUND) {
    const next = found.next;
    let length: number | undefined;
    if (next && next.line === offset + 1) length = next.byte - start;
    else if (!next && lastLine) length = blob.bytes - start;
    // Otherwise the line is shorter than the bound (no entry follows it), so the offset is past it.
    if (length === undefined || byteOffset >= length) throw pastLine(offset, byteOffset, length ?? byteOffset);
    return;
  }
  const end = Math.min(start + byteOffset, blob.bytes);
  const buf = Buffer.allocUnsafe(PAGE_CHUNK);
  for (let position = start; position < end; ) {
    const { bytesRead } = await blob.handle.read(buf, 0, Math.min(PAGE_CHUNK, end - position), position);
    if (bytesRead === 0) throw changed(blob);
    const nl = buf.subarray(0, bytesRead).indexOf(LF);
    if (nl !== -1) throw pastLine(offset, byteOffset, position + nl + 1 - start);
    position += bytesRead;
  }
  if (start + byteOffset >= blob.bytes) throw pastLine(offset, byteOffset, blob.bytes - start);
}

// A page never starts with half a character; bytes that are not valid UTF-8 have none to split.
async function checkCharBoundary(
  blob: VerifiedBlob,
  lineStart: number,
  offset: number,
  byteOffset: number,
): Promise<void> {
  const at = lineStart + byteOffset;
  const from = Math.max(lineStart, at - 3);
  const buf = Buffer.alloc(at + 4 - from);
  const { bytesRead } = await blob.handle.read(buf, 0, buf.length, from);
  const b = buf.subarray(0, bytesRead);
  const i = at - from;
  if (i >= b.length || ((b[i] as number) & 0xc0) !== 0x80) return;
  let lead = i - 1;
  while (lead >= 0 && ((b[lead] as number) & 0xc0) === 0x80) lead--;
  if (lead < 0) return;
  const x = b[lead] as number;
  const need = x >= 0xf0 ? 4 : x >= 0xe0 ? 3 : x >= 0xc0 ? 2 : 1;
  if (lead + need <= i || lead + need > b.length || !isUtf8(b.subarray(lead, lead + need))) return;
  const startsAt = byteOffset - (i - lead);
  throw new BadArgumentsError(
    `byteOffset ${byteOffset} falls inside a character of line ${offset}; that character starts at byteOffset ${startsAt}`,
    { offset, byteOffset, characterStart: startsAt },
  );
}

/** A collected page: its bytes and where it ends. */
interface Collected {
  bytes: Buffer;
  /** Lines the page touches. */
  lines: number;
  /** Bytes into its last line where the page stopped, when it stopped inside that line. */
  cutInLine: number | undefined;
}

// Holds at most MAX_PAGE_BYTES plus one read buffer.
async function collect(
  blob: VerifiedBlob,
  start: number,
  offset: number,
  byteOffset: number,
  limit: number,
  expected: number,
): Promise<Collected> {
  const buf = Buffer.allocUnsafe(PAGE_CHUNK);
  const parts: Buffer[] = [];
  /** Where each complete line of the page ends (just past its `\n`), in page bytes. */
  const ends: number[] = [];
  let position = start;
  let pageBytes = 0;
  let lastByte = LF;
  while (ends.length < expected) {
    const want = Math.min(PAGE_CHUNK, MAX_PAGE_BYTES + 1 - pageBytes);
    const { bytesRead } = await blob.handle.read(buf, 0, want, position);
    if (bytesRead === 0) break;
    position += bytesRead;
    let end = 0;
    while (ends.length < expected) {
      const nl = buf.indexOf(LF, end);
      if (nl === -1 || nl >= bytesRead) {
        end = bytesRead;
        break;
      }
      end = nl + 1;
      ends.push(pageBytes + end);
    }
    parts.push(Buffer.from(buf.subarray(0, end)));
    pageBytes += end;
    lastByte = buf[end - 1] ?? LF;
    if (pageBytes > MAX_PAGE_BYTES) {
      return overflowPage(blob, Buffer.concat(parts, pageBytes), ends, start, offset, byteOffset, limit);
    }
  }
  // The last line of a blob without a final `\n` ends at end of file.
  let got = ends.length;
  if (got < expected && pageBytes > 0 && lastByte !== LF) {
    got++;
    ends.push(pageBytes);
  }
  if (got !== expected) throw changed(blob);
  const bytes = Buffer.concat(parts, pageBytes);
  // Invalid bytes show as wider U+FFFD: the bound is on the text.
  if (!isUtf8(bytes) && decodedSize(bytes) > MAX_PAGE_BYTES) {
    return overflowPage(blob, bytes, ends, start, offset, byteOffset, limit);
  }
  return { bytes, lines: expected, cutInLine: undefined };
}

/**
 * A page past the bound keeps the whole lines that fit; a line longer than a
 * page on its own follows in part. A line that would fit a page of its own is
 * never cut: ERESOURCELIMIT says how many lines fit, so the reader asks for
 * that many and reads on.
 */
async function overflowPage(
  blob: VerifiedBlob,
  raw: Buffer,
  ends: readonly number[],
  start: number,
  offset: number,
  byteOffset: number,
  limit: number,
): Promise<Collected> {
  let fits = 0;
  let text = 0;
  let at = 0;
  for (const end of ends) {
    const width = decodedSize(raw.subarray(at, end));
    if (text + width > MAX_PAGE_BYTES) break;
    text += width;
    fits++;
    at = end;
  }
  // The first line did not fit at all, so it is longer than a page (or is the rest of one).
  if (fits > 0 && !(await longerThanPage(blob, start + at))) throw tooLarge(raw.length, offset, limit, fits);
  // Up to the crossing line's `\n` at most: the cut falls inside it.
  const lineEnd = fits < ends.length ? (ends[fits] as number) - 1 : raw.length;
  const part = textBudgetCut(raw.subarray(at, lineEnd), MAX_PAGE_BYTES - text);
  if (part === 0) return { bytes: raw.subarray(0, at), lines: fits, cutInLine: undefined };
  return { bytes: raw.subarray(0, at + part), lines: fits + 1, cutInLine: (fits === 0 ? byteOffset : 0) + part };
}

/** True when the line starting at byte `from` of the blob is longer, as text, than a page. Reads at most one page. */
async function longerThanPage(blob: VerifiedBlob, from: number): Promise<boolean> {
  const buf = Buffer.allocUnsafe(MAX_PAGE_BYTES + 1);
  let got = 0;
  while (got < buf.length) {
    const { bytesRead } = await blob.handle.read(buf, got, buf.length - got, from + got);
    if (bytesRead === 0) break;
    const nl = buf.subarray(got, got + bytesRead).indexOf(LF);
    if (nl !== -1) return decodedSize(buf.subarray(0, got + nl + 1)) > MAX_PAGE_BYTES;
    got += bytesRead;
  }
  return decodedSize(buf.subarray(0, got)) > MAX_PAGE_BYTES;
}

/** Reads a page of the verified blob `digest`. */
async function readBlobPage(
  store: Store,
  digest: string,
  opts: { offset: number; limit: number; byteOffset: number },
  expectedBytes?: number,
): Promise<Collected & { totalLines: number }> {
  const { offset, limit, byteOffset } = opts;
  const blob = await openVerifiedBlob(store, digest);
  try {
    if (expectedBytes !== undefined && blob.bytes !== expectedBytes) {
      throw new IntegrityError(
        `artifact ${digest} has ${blob.bytes} bytes but its manifest records ${expectedBytes}; the manifest does not describe it`,
        { digest, bytes: blob.bytes, expected: expectedBytes },
      );
    }
    const totalLines = blob.lines;
    if (offset >= totalLines) {
      if (byteOffset > 0) {
        throw new BadArgumentsError(
          `byteOffset ${byteOffset} needs a line, but offset ${offset} is past the end (${totalLines} lines)`,
          { offset, byteOffset, totalLines },
        );
      }
      return { bytes: Buffer.alloc(0), lines: 0, cutInLine: undefined, totalLines };
    }
    const expected = Math.min(limit, totalLines - offset);
    const found = await anchorFor(store, blob, offset);
    const start = await lineStart(blob, found.anchor, offset);
    if (byteOffset > 0) {
      await checkByteOffset(blob, found, offset, start, byteOffset);
      await checkCharBoundary(blob, start, offset, byteOffset);
    }
    const page = await collect(blob, start + byteOffset, offset, byteOffset, limit, expected);
    return { ...page, totalLines };
  } finally {
    await blob.close();
  }
}

/** What an artifact URI addresses: the blob to read and, for a stream, the size its manifest records. */
export interface ResolvedArtifact {
  digest: string;
  stream?: string;
  blob: string;
  expectedBytes?: number;
}

/** A blob itself or a manifest's stream; errors as for a read. */
export async function resolveArtifact(store: Store, uri: string): Promise<ResolvedArtifact> {
  const { digest, stream } = parseArtifactUri(uri);
  if (stream === undefined) return { digest, blob: digest };
  const manifest = await loadManifest(store, digest);
  const entry = manifest.streams.find((s) => s.name === stream);
  if (!entry) {
    const declared = manifest.streams.map((s) => s.name).join(', ') || '(none)';
    throw new UnknownStreamError(
      `manifest ${digest} has no stream ${JSON.stringify(stream)}; its streams are: ${declared}`,
      {
        digest,
        stream,
        streams: manifest.streams.map((s) => s.name),
      },
    );
  }
  return { digest, stream, blob: entry.digest, expectedBytes: entry.bytes };
}

/** Through the line index: O(64 KiB) of scanning, not O(offset). */
export async function lineStartByte(store: Store, blob: VerifiedBlob, offset: number): Promise<number> {
  return lineStart(blob, (await anchorFor(store, blob, offset)).anchor, offset);
}

/**
 * Reads one page of the artifact at `uri`, as its stored bytes.
 *
 * - `artifact://<digest>` reads the blob as stored (a manifest reads as its JSON).
 * - `artifact://<digest>/<stream>` reads that stream of the manifest `<digest>`.
 *
 * The first read of a blob through a given {@link Store} hashes all of it.
 *
 * @throws BadUriError (EBADURI) for anything but an exact artifact URI.
 * @throws BadArgumentsError (EBADARGS) for a bad offset, limit or byteOffset (see {@link pageOptions}), or a byteOffset outside its line.
 * @throws NotFoundError (ENOTFOUND) when the blob (or the stream's blob) is absent.
 * @throws IntegrityError (EINTEGRITY) when stored content does not match its digest.
 * @throws NotManifestError (ENOTMANIFEST) for a stream suffix on a blob that is not a manifest.
 * @throws UnknownStreamError (EUNKNOWNSTREAM) for a stream the manifest does not declare.
 * @throws ResourceLimitError (ERESOURCELIMIT) when whole lines pass {@link MAX_PAGE_BYTES} (`details.fits` says how many fit).
 */
export async function readPageBytes(store: Store, uri: string, opts?: ReadPageOptions): Promise<ReadPageBytes> {
  const options = pageOptions(opts);
  const { digest, stream, blob, expectedBytes } = await resolveArtifact(store, uri);
  const page = await readBlobPage(store, blob, options, expectedBytes);
  const cut = page.cutInLine !== undefined;
  const next = options.offset + page.lines - (cut ? 1 : 0);
  return {
    bytes: page.bytes,
    offset: options.offset,
    lines: page.lines,
    totalLines: page.totalLines,
    nextOffset: page.lines > 0 && next < page.totalLines ? next : null,
    nextByteOffset: cut ? (page.cutInLine as number) : null,
    lossy: !isUtf8(page.bytes),
    digest,
    ...(stream === undefined ? {} : { stream }),
    blob,
  };
}

/** {@link readPageBytes} decoded as UTF-8, invalid sequences as U+FFFD (the page then `lossy`). */
export async function readPage(store: Store, uri: string, opts?: ReadPageOptions): Promise<ReadPage> {
  const { bytes, ...info } = await readPageBytes(store, uri, opts);
  return { content: bytes.toString('utf8'), ...info };
}
