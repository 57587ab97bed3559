/**
 * Using and rebuilding the cached line-index file (format in line-index.ts).
 * Nothing here trusts it: headers and entries are checked against the
 * verified blob, and failing to build or place one is swallowed, since a
 * read can always scan.
 */
import { createHash, type Hash } from 'node:crypto';
import type { BlobHandle } from './blob-handle.js';
import type { StoreFile } from './file.js';
import { writeAll } from './io.js';
import {
  decodeIndexHeader,
  encodeIndexHeader,
  INDEX_ENTRY_BYTES,
  INDEX_EVERY_BYTES,
  INDEX_HEADER_BYTES,
  INDEX_MIN_BLOB_BYTES,
} from './line-index.js';
import type { Placement } from './placement.js';
import type { Store } from './store.js';

/** A known line start: zero-based line number and the byte offset where it begins. */
export interface LineAnchor {
  /** Zero-based line number. */
  line: number;
  /** Byte offset in the blob where that line begins. */
  byte: number;
}

/** What a consistent index header says, plus the index file's own size. */
export interface IndexHeaderInfo {
  /** Size of the blob the index describes. */
  bytes: number;
  /** Lines of the blob the index describes. */
  lines: number;
  /** Entries in the file. */
  entries: number;
  /** Size of the index file itself. */
  fileSize: number;
}

/** The last known line start at or before a line and the first entry after it; `indexed` false without an index. */
export interface IndexedAnchor {
  anchor: LineAnchor;
  /** The first entry after `anchor`'s line; absent when none follows (or no index was used). */
  next?: LineAnchor;
  indexed: boolean;
}

// Entries fall at the first line start INDEX_EVERY_BYTES after the previous one, so an index knows where such a line ends.
export const INDEX_SCAN_BOUND = INDEX_EVERY_BYTES;

/** The start of the blob: line 0 begins at byte 0 and is never stored in an index. */
export const BLOB_START: LineAnchor = Object.freeze({ line: 0, byte: 0 });

/** Below this many candidate entries the search reads them in one go (at most 4 KiB) instead of probing. */
const BLOCK_ENTRIES = 256;
/** Read size when comparing an existing index with a freshly computed one. */
const COMPARE_CHUNK = 64 * 1024;
const LF = 0x0a;

/** True when a blob of `bytes` bytes should have an index file. */
export function wantsIndex(bytes: number): boolean {
  return bytes >= INDEX_MIN_BLOB_BYTES;
}

/** Fills `buf` from `position`; false at end of file first. */
export async function readExactly(fh: Pick<BlobHandle, 'read'>, buf: Buffer, position: number): Promise<boolean> {
  let off = 0;
  while (off < buf.length) {
    const { bytesRead } = await fh.read(buf, off, buf.length - off, position + off);
    if (bytesRead === 0) return false;
    off += bytesRead;
  }
  return true;
}

/** The header of an opened index file; undefined when magic, recorded size or entry count does not fit. */
export async function readHeader(fh: StoreFile, blobBytes: number): Promise<IndexHeaderInfo | undefined> {
  const st = await fh.stat();
  // A FIFO or device planted at the index's path is no index (opened without blocking, never read).
  if (!st.isFile()) return undefined;
  const fileSize = st.size;
  const buf = Buffer.alloc(INDEX_HEADER_BYTES);
  if (!(await readExactly(fh, buf, 0))) return undefined;
  const h = decodeIndexHeader(buf);
  if (!h || h.bytes !== blobBytes) return undefined;
  if (!Number.isSafeInteger(h.entries) || fileSize !== INDEX_HEADER_BYTES + h.entries * INDEX_ENTRY_BYTES) {
    return undefined;
  }
  return { ...h, fileSize };
}

/** The header of the index of `digest` when it exists and matches a blob of `blobBytes` bytes. */
export async function probeIndexHeader(
  store: Store,
  digest: string,
  blobBytes: number,
): Promise<IndexHeaderInfo | undefined> {
  const fh = await store.backend.openIndex(digest);
  if (!fh) return undefined;
  try {
    return await readHeader(fh, blobBytes);
  } catch {
    return undefined;
  } finally {
    await fh.close().catch(() => {});
  }
}

/** The entry encoded at `buf[at]`. */
export function entryAt(buf: Buffer, at: number): LineAnchor {
  return { line: Number(buf.readBigUInt64LE(at)), byte: Number(buf.readBigUInt64LE(at + 8)) };
}

/**
 * The last indexed line start at or before `line` and the entry after it, by
 * a binary search of positioned reads. Undefined when the index is missing
 * or any read entry fails a check (strictly between its neighbours, line <=
 * byte, within the blob, `\n` before the chosen one): rebuild or scan instead.
 */
export async function findAnchor(
  store: Store,
  digest: string,
  blob: BlobHandle,
  blobBytes: number,
  blobLines: number,
  line: number,
): Promise<IndexedAnchor | undefined> {
  const fh = await store.backend.openIndex(digest);
  if (!fh) return undefined;
  try {
    const header = await readHeader(fh, blobBytes);
    if (!header || header.lines !== blobLines) return undefined;
    // Invariant: entry lo (or the implicit start when lo = -1) has line <= target; entry hi (or the end) has line > target.
    let lo = -1;
    let hi = header.entries;
    let low: LineAnchor = BLOB_START;
    let high: LineAnchor = { line: blobLines + 1, byte: blobBytes + 1 };
    const accept = (e: LineAnchor): boolean =>
      e.line > low.line && e.line < high.line && e.byte > low.byte && e.byte < high.byte && e.line <= e.byte;
    const probe = Buffer.alloc(INDEX_ENTRY_BYTES);
    while (hi - lo > BLOCK_ENTRIES) {
      const mid = lo + Math.floor((hi - lo) / 2);
      if (!(await readExactly(fh, probe, INDEX_HEADER_BYTES + mid * INDEX_ENTRY_BYTES))) return undefined;
      const e = entryAt(probe, 0);
      if (!accept(e)) return undefined;
      if (e.line <= line) {
        lo = mid;
        low = e;
      } else {
        hi = mid;
        high = e;
      }
    }
    const count = hi - lo - 1;
    if (count > 0) {
      const block = Buffer.alloc(count * INDEX_ENTRY_BYTES);
      if (!(await readExactly(fh, block, INDEX_HEADER_BYTES + (lo + 1) * INDEX_ENTRY_BYTES))) return undefined;
      for (let i = 0; i < count; i++) {
        const e = entryAt(block, i * INDEX_ENTRY_BYTES);
        if (!accept(e)) return undefined;
        if (e.line > line) {
          high = e;
          break;
        }
        low = e;
      }
    }
    // An entry is only trusted at a real line start.
    const before = Buffer.alloc(1);
    if (low !== BLOB_START && (!(await readExactly(blob, before, low.byte - 1)) || before[0] !== LF)) return undefined;
    const atEnd = high.line > blobLines;
    if (!atEnd && (!(await readExactly(blob, before, high.byte - 1)) || before[0] !== LF)) return undefined;
    return atEnd ? { anchor: low, indexed: true } : { anchor: low, next: high, indexed: true };
  } catch {
    return undefined;
  } finally {
    await fh.close().catch(() => {});
  }
}

/** Never throws: the first failure removes its temporary file and leaves the blob without an index. */
export class IndexBuilder {
  private readonly store: Store;
  /** The store's writing side (store/placement.ts). */
  private readonly placement: Placement;
  private fh: StoreFile | undefined;
  private path: string | undefined;
  private position = INDEX_HEADER_BYTES;
  private entries = 0;
  private failed = false;

  /** A builder writing into `store`'s tmp/. */
  constructor(store: Store) {
    this.store = store;
    this.placement = store.placement;
  }

  /** Appends encoded entries (as produced by `LineScanner.takeEntries`). */
  async add(entries: Buffer): Promise<void> {
    if (this.failed || entries.length === 0) return;
    try {
      await this.writeAt(entries, this.position);
      this.position += entries.length;
      this.entries += entries.length / INDEX_ENTRY_BYTES;
    } catch {
      await this.abort();
    }
  }

  /** Writes the header and moves the file to the index path of `digest`. Returns true when placed. */
  async finish(digest: string, bytes: number, lines: number): Promise<boolean> {
    if (this.failed) return false;
    try {
      await this.writeAt(encodeIndexHeader(bytes, lines, this.entries), 0);
      const fh = this.fh as StoreFile;
      this.fh = undefined;
      await fh.close();
      await this.store.backend.placeIndex(this.path as string, digest);
      this.path = undefined;
      return true;
    } catch {
      await this.abort();
      return false;
    }
  }

  /** Stops and removes the temporary file. */
  async abort(): Promise<void> {
    this.failed = true;
    const { fh, path } = this;
    this.fh = undefined;
    this.path = undefined;
    if (fh) await fh.close().catch(() => {});
    if (path) await this.store.io.unlink(path).catch(() => {});
  }

  private async writeAt(buf: Buffer, position: number): Promise<void> {
    if (!this.fh) {
      const { handle, path } = await this.placement.createTemp('idx');
      this.fh = handle;
      this.path = path;
    }
    await writeAll(this.store.io, this.fh, buf, position);
  }
}

/** Compares fresh entries with an index file by hash, holding neither in memory. */
export class IndexComparer {
  private readonly hash: Hash = createHash('sha256');
  private entries = 0;

  /** Feeds the next encoded entries. */
  add(entries: Buffer): void {
    this.hash.update(entries);
    this.entries += entries.length / INDEX_ENTRY_BYTES;
  }

  async matches(store: Store, digest: string, bytes: number, lines: number): Promise<boolean> {
    const fh = await store.backend.openIndex(digest);
    if (!fh) return false;
    try {
      const header = await readHeader(fh, bytes);
      if (!header || header.lines !== lines || header.entries !== this.entries) return false;
      const existing = createHash('sha256');
      const buf = Buffer.allocUnsafe(COMPARE_CHUNK);
      let pos = INDEX_HEADER_BYTES;
      while (pos < header.fileSize) {
        const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, header.fileSize - pos), pos);
        if (bytesRead === 0) return false;
        existing.update(buf.subarray(0, bytesRead));
        pos += bytesRead;
      }
      return existing.digest('hex') === this.hash.digest('hex');
    } catch {
      return false;
    } finally {
      await fh.close().catch(() => {});
    }
  }
}
