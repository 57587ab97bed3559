/**
 * The filesystem half of the built-in `read` tool: where a path really
 * points, and what a page of it is (text lines, a directory listing, or an
 * image/PDF attachment by its bytes). Memory stays bounded: text is scanned
 * in 64 KiB reads keeping only the page's lines; attachments are read whole,
 * so {@link MAX_ATTACHMENT_BYTES} bounds them.
 */

import { isUtf8 } from 'node:buffer';
import { constants, promises as fsp } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { homedir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import {
  BadArgumentsError,
  BinaryFileError,
  DeniedError,
  NotFoundError,
  ResourceLimitError,
  toSluiceError,
} from '../../engine/protocol/errors.js';
import { utf8CompleteEnd } from '../../engine/protocol/text.js';
import { countNewlines } from '../../store/lines.js';
import type { Attachment } from '../tool.js';

/** The largest text page or directory listing page, in UTF-8 bytes of output (numbers included). */
const MAX_FS_PAGE_BYTES = 2 * 1024 * 1024;
/** The largest image or PDF returned as an attachment. */
const MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024;
/** Bytes at the start of a file checked for NUL and invalid UTF-8 (binary detection). */
const SNIFF_BYTES = 8 * 1024;
/** Names collected from one directory before giving up: the listing is sorted, so it is held whole. */
const MAX_LISTING_NAME_BYTES = 16 * 1024 * 1024;
/** Width of the right-aligned line number, as `cat -n` prints it. */
const NUMBER_WIDTH = 6;
const READ_CHUNK = 64 * 1024;
const LF = 0x0a;

/** Where a filesystem path points, as prepared for the approval policy. */
export interface FsTarget {
  /** Absolute path after `~` expansion and resolution against the working directory (symlinks not followed). */
  path: string;
  /**
   * The path with every symlink resolved; for a missing file, its deepest
   * existing ancestor's real path plus the rest, so a missing file outside
   * the root is denied, not reported missing.
   */
  realPath: string;
  /** True when nothing exists at the path. */
  missing: boolean;
}

/** One page of a text file or directory listing. */
export interface FsPage {
  kind: 'text' | 'directory';
  content: string;
  offset: number;
  lines: number;
  totalLines: number;
  nextOffset: number | null;
  /** True when a line of the page held invalid UTF-8 (shown as U+FFFD). */
  lossy: boolean;
}

/** An image or PDF. */
export interface FsMedia {
  kind: 'media';
  attachment: Attachment;
  bytes: number;
}

function isMissing(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** `~` and `~/...` name the home directory; `~user` is not expanded (it is an ordinary name). */
function expandHome(p: string): string {
  if (p === '~') return homedir();
  if (p.startsWith('~/')) return join(homedir(), p.slice(2));
  return p;
}

/** Resolves `filePath` for a read (`~`, `cwd`, symlinks) without opening it; EBADARGS for a NUL byte. */
export async function resolveFsTarget(filePath: string, cwd: string): Promise<FsTarget> {
  if (filePath.includes('\0')) {
    throw new BadArgumentsError(`filePath ${JSON.stringify(filePath)} contains a NUL byte`, { filePath });
  }
  const path = resolve(cwd, expandHome(filePath));
  try {
    return { path, realPath: await fsp.realpath(path), missing: false };
  } catch (err) {
    if (!isMissing(err)) throw toSluiceError(err, 'EDISK');
  }
  // Walk up to the deepest ancestor that exists and resolve that instead.
  const rest: string[] = [];
  let dir = path;
  for (;;) {
    rest.unshift(basename(dir));
    const parent = dirname(dir);
    if (parent === dir) return { path, realPath: path, missing: true };
    dir = parent;
    try {
      const real = await fsp.realpath(dir);
      return { path, realPath: join(real, ...rest), missing: true };
    } catch (err) {
      if (!isMissing(err)) throw toSluiceError(err, 'EDISK');
    }
  }
}

/** The media type of content starting with `head`, by magic bytes (never by file name). */
function sniffMediaType(head: Uint8Array): string | undefined {
  const b = Buffer.from(head.buffer, head.byteOffset, head.byteLength);
  if (b.length >= 8 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) {
    return 'image/png';
  }
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  const ascii = b.subarray(0, 12).toString('latin1');
  if (ascii.startsWith('GIF87a') || ascii.startsWith('GIF89a')) return 'image/gif';
  if (ascii.startsWith('RIFF') && ascii.slice(8, 12) === 'WEBP') return 'image/webp';
  if (ascii.startsWith('%PDF-')) return 'application/pdf';
  return undefined;
}

/** True when `head` (the first bytes of a file of `size` bytes) looks binary: a NUL byte or invalid UTF-8. */
function looksBinary(head: Uint8Array, size: number): boolean {
  if (head.includes(0)) return true;
  // A character cut by the sniff window is not a fault of the file.
  const end = head.length < size ? utf8CompleteEnd(head) : head.length;
  return !isUtf8(head.subarray(0, end));
}

function pageTooLarge(what: string, offset: number, limit: number, bytes: number): ResourceLimitError {
  return new ResourceLimitError(
    `the ${what} page at offset ${offset} with limit ${limit} is larger than ${MAX_FS_PAGE_BYTES} bytes; read it with a smaller limit`,
    { offset, limit, maxBytes: MAX_FS_PAGE_BYTES, bytes },
  );
}

function nextOffsetOf(offset: number, lines: number, totalLines: number): number | null {
  const next = offset + lines;
  return lines > 0 && next < totalLines ? next : null;
}

async function readAt(fh: FileHandle, buf: Buffer, position: number, length: number): Promise<number> {
  let got = 0;
  while (got < length) {
    const { bytesRead } = await fh.read(buf, got, length - got, position + got);
    if (bytesRead === 0) break;
    got += bytesRead;
  }
  return got;
}

/**
 * Formats lines `[offset, offset + limit)` of the open file as `cat -n`
 * does and counts every line, reading at most `size` bytes (a growing file
 * does not keep the scan going).
 */
async function textPage(
  fh: FileHandle,
  size: number,
  offset: number,
  limit: number,
  signal: AbortSignal,
): Promise<FsPage> {
  const buf = Buffer.allocUnsafe(READ_CHUNK);
  const out: string[] = [];
  let outBytes = 0;
  let pieces: Buffer[] = [];
  let lineBytes = 0;
  let line = 0; // index of the line being scanned
  let lines = 0;
  let position = 0;
  let lastByte = LF;
  let lossy = false;
  const end = offset + limit;
  const emit = () => {
    const raw = Buffer.concat(pieces, lineBytes);
    lossy ||= !isUtf8(raw);
    const text = raw.toString('utf8');
    const formatted = `${String(line + 1).padStart(NUMBER_WIDTH)}\t${text}\n`;
    outBytes += Buffer.byteLength(formatted, 'utf8');
    if (outBytes > MAX_FS_PAGE_BYTES) throw pageTooLarge('text', offset, limit, outBytes);
    out.push(formatted);
    lines++;
    pieces = [];
    lineBytes = 0;
  };
  while (position < size) {
    signal.throwIfAborted();
    const n = await readAt(fh, buf, position, Math.min(READ_CHUNK, size - position));
    if (n === 0) break;
    position += n;
    const view = buf.subarray(0, n);
    lastByte = view[n - 1] as number;
    if (line >= end) {
      // Past the page: only counting lines is left.
      line += countNewlines(view);
      continue;
    }
    let start = 0;
    while (start < n) {
      const nl = view.indexOf(LF, start);
      const stop = nl === -1 ? n : nl;
      if (line >= offset && line < end) {
        const piece = view.subarray(start, stop);
        // Raw bytes never exceed their formatted form (U+FFFD is wider than what it replaces): stop early.
        if (outBytes + lineBytes + piece.length > MAX_FS_PAGE_BYTES) {
          throw pageTooLarge('text', offset, limit, outBytes + lineBytes + piece.length);
        }
        pieces.push(Buffer.from(piece));
        lineBytes += piece.length;
        if (stop < n) emit();
      }
      if (stop === n) break;
      line++;
      start = stop + 1;
    }
  }
  // The last line of a file without a final newline ends at end of file.
  const unterminated = position > 0 && lastByte !== LF;
  if (unterminated && line >= offset && line < end) emit();
  const totalLines = unterminated ? line + 1 : line;
  return {
    kind: 'text',
    content: out.join(''),
    offset,
    lines,
    totalLines,
    nextOffset: nextOffsetOf(offset, lines, totalLines),
    lossy,
  };
}

/** Lists a directory: one entry a line, `/` after directories, sorted by name. */
async function directoryPage(path: string, offset: number, limit: number, signal: AbortSignal): Promise<FsPage> {
  const names: string[] = [];
  let nameBytes = 0;
  const dir = await fsp.opendir(path);
  try {
    for await (const e of dir) {
      signal.throwIfAborted();
      const name = e.isDirectory() ? `${e.name}/` : e.name;
      nameBytes += Buffer.byteLength(name) + 1;
      if (nameBytes > MAX_LISTING_NAME_BYTES) {
        throw new ResourceLimitError(
          `the directory ${JSON.stringify(path)} has more than ${MAX_LISTING_NAME_BYTES} bytes of names; list it with bash`,
          { maxBytes: MAX_LISTING_NAME_BYTES },
        );
      }
      names.push(name);
    }
  } finally {
    // Iterating to the end closes it; an early exit must not leak the handle.
    await dir.close().catch(() => {});
  }
  names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const page = names.slice(offset, offset + limit);
  const content = page.map((n) => `${n}\n`).join('');
  const bytes = Buffer.byteLength(content, 'utf8');
  if (bytes > MAX_FS_PAGE_BYTES) throw pageTooLarge('directory', offset, limit, bytes);
  return {
    kind: 'directory',
    content,
    offset,
    lines: page.length,
    totalLines: names.length,
    nextOffset: nextOffsetOf(offset, page.length, names.length),
    // Names come from readdir as strings: Node has already decoded them.
    lossy: false,
  };
}

async function mediaOf(fh: FileHandle, size: number, mediaType: string, name: string): Promise<FsMedia> {
  if (size > MAX_ATTACHMENT_BYTES) {
    throw new ResourceLimitError(
      `${JSON.stringify(name)} is a ${mediaType} of ${size} bytes, over the ${MAX_ATTACHMENT_BYTES}-byte attachment bound`,
      { bytes: size, maxBytes: MAX_ATTACHMENT_BYTES, mediaType },
    );
  }
  const data = Buffer.allocUnsafe(size);
  const got = await readAt(fh, data, 0, size);
  return { kind: 'media', bytes: got, attachment: { mediaType, data: data.subarray(0, got).toString('base64'), name } };
}

/** The path the kernel has for an open descriptor (Linux /proc), or undefined where it cannot tell. */
async function openedPath(fh: FileHandle): Promise<string | undefined> {
  try {
    return await fsp.readlink(`/proc/self/fd/${fh.fd}`);
  } catch {
    return undefined;
  }
}

/**
 * Reads the approved `target`: a page of text or a directory, or a whole
 * image/PDF. Opened without following a final symlink and without blocking
 * (a FIFO cannot hang the worker); the open descriptor decides the kind, so
 * a file swapped after approval is judged by what was opened.
 */
export async function readFsTarget(
  target: FsTarget,
  offset: number,
  limit: number,
  signal: AbortSignal,
): Promise<FsPage | FsMedia> {
  if (target.missing) throw new NotFoundError(`no such file or directory: ${target.path}`, { path: target.path });
  let fh: FileHandle;
  try {
    fh = await fsp.open(target.realPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if (isMissing(err)) throw new NotFoundError(`no such file or directory: ${target.path}`, { path: target.path });
    throw toSluiceError(err, 'EDISK');
  }
  try {
    const opened = await openedPath(fh);
    // O_NOFOLLOW covers only the last component: a directory on the way may have become a symlink
    // since realpath(). Where /proc says what the descriptor is, anything but realPath is refused.
    if (opened !== undefined && opened !== target.realPath) {
      throw new DeniedError(
        `${target.path} changed while it was being opened (it now leads to ${JSON.stringify(opened)}); not read`,
        { path: target.path },
      );
    }
    const st = await fh.stat();
    if (st.isDirectory()) {
      // List the directory that was opened and checked, not whatever the path names by now.
      const listed = opened === undefined ? target.realPath : `/proc/self/fd/${fh.fd}`;
      return await directoryPage(listed, offset, limit, signal);
    }
    if (!st.isFile()) {
      throw new BadArgumentsError(`${target.path} is not a regular file or directory; read cannot read it`, {
        path: target.path,
      });
    }
    const head = Buffer.allocUnsafe(Math.min(SNIFF_BYTES, st.size));
    const got = await readAt(fh, head, 0, head.length);
    const sniffed = head.subarray(0, got);
    const mediaType = sniffMediaType(sniffed);
    if (mediaType) return await mediaOf(fh, st.size, mediaType, basename(target.path));
    if (looksBinary(sniffed, st.size)) {
      throw new BinaryFileError(`${target.path} is a binary file (not text, not an image or PDF)`, {
        path: target.path,
      });
    }
    return await textPage(fh, st.size, offset, limit, signal);
  } finally {
    await fh.close();
  }
}
