/**
 * The bytes of a pack and its index, and the scan that trusts only the pack.
 * A pack, appended to by its owner only:
 *
 *     0   8  magic "SLPACK01"
 *     8      records, back to back:
 *            0   4  magic "SLPR"
 *            4   1  type: 1 = blob, 2 = seal (the owner will append nothing more)
 *            5   3  zero
 *            8   8  content length (u64 LE)
 *            16 32  SHA-256 of the content (raw; zero for a seal)
 *            48  4  CRC-32 of bytes 0..48 of this header
 *            52  4  zero
 *            56  n  content
 *
 * The header check tells a record from a torn tail without hashing. The
 * index `packs/<same>.idx` ("SLPIDX01", 48-byte entries: digest, offset,
 * length) is never fsynced nor trusted alone.
 */
import { crc32 } from 'node:zlib';

/** First bytes of every pack. */
export const PACK_MAGIC = Buffer.from('SLPACK01', 'latin1');
/** First bytes of every pack index. */
export const PACK_INDEX_MAGIC = Buffer.from('SLPIDX01', 'latin1');
const RECORD_MAGIC = 0x52504c53; // "SLPR" little-endian
/** Bytes of a record header. */
export const RECORD_HEADER_BYTES = 56;
/** Bytes of a pack index entry. */
const PACK_INDEX_ENTRY_BYTES = 48;

/** Record types. */
export const RECORD_BLOB = 1;
/** The owner appends nothing after a seal: a collection may repack the pack while its owner lives. */
const RECORD_SEAL = 2;

/** One blob record of a pack: where its content lies. */
export interface PackEntry {
  /** 64 lowercase hex. */
  digest: string;
  /** Offset of the content (after the header) in the pack. */
  offset: number;
  /** Content length. */
  length: number;
}

/** A record header for `digest` (64 hex) and `length`, or a seal when `digest` is undefined. */
export function encodeRecordHeader(digest: string | undefined, length: number): Buffer {
  const h = Buffer.alloc(RECORD_HEADER_BYTES);
  h.writeUInt32LE(RECORD_MAGIC, 0);
  h[4] = digest === undefined ? RECORD_SEAL : RECORD_BLOB;
  h.writeBigUInt64LE(BigInt(length), 8);
  if (digest !== undefined) h.write(digest, 16, 32, 'hex');
  h.writeUInt32LE(crc32(h.subarray(0, 48)), 48);
  return h;
}

/** Appends to `bufs` the records of `blobs` placed from pack offset `at`; their entries, and where they end. */
export function encodeRecords(
  blobs: ReadonlyArray<{ digest: string; content: Uint8Array }>,
  at: number,
  bufs: Uint8Array[],
): { entries: PackEntry[]; end: number } {
  const entries: PackEntry[] = [];
  for (const b of blobs) {
    const header = encodeRecordHeader(b.digest, b.content.length);
    bufs.push(header);
    if (b.content.length > 0) bufs.push(b.content);
    entries.push({ digest: b.digest, offset: at + header.length, length: b.content.length });
    at += header.length + b.content.length;
  }
  return { entries, end: at };
}

/** What a record header says, or undefined when the bytes are not a valid header. */
export function decodeRecordHeader(
  h: Buffer,
  at = 0,
): { type: typeof RECORD_BLOB | typeof RECORD_SEAL; digest: string; length: number } | undefined {
  if (h.length - at < RECORD_HEADER_BYTES) return undefined;
  if (h.readUInt32LE(at) !== RECORD_MAGIC) return undefined;
  if (h.readUInt32LE(at + 48) !== crc32(h.subarray(at, at + 48))) return undefined;
  const type = h[at + 4];
  if (type !== RECORD_BLOB && type !== RECORD_SEAL) return undefined;
  const length = h.readBigUInt64LE(at + 8);
  if (length > BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
  return { type, digest: h.toString('hex', at + 16, at + 48), length: Number(length) };
}

/** One index entry. */
export function encodeIndexEntry(e: PackEntry): Buffer {
  const b = Buffer.alloc(PACK_INDEX_ENTRY_BYTES);
  b.write(e.digest, 0, 32, 'hex');
  b.writeBigUInt64LE(BigInt(e.offset), 32);
  b.writeBigUInt64LE(BigInt(e.length), 40);
  return b;
}

// A torn entry, or one past the pack, is left out; undefined for a wrong magic.
export function decodeIndex(buf: Buffer, packSize: number): PackEntry[] | undefined {
  if (buf.length < PACK_INDEX_MAGIC.length || !buf.subarray(0, PACK_INDEX_MAGIC.length).equals(PACK_INDEX_MAGIC)) {
    return undefined;
  }
  const out: PackEntry[] = [];
  for (let at = PACK_INDEX_MAGIC.length; at + PACK_INDEX_ENTRY_BYTES <= buf.length; at += PACK_INDEX_ENTRY_BYTES) {
    const offset = Number(buf.readBigUInt64LE(at + 32));
    const length = Number(buf.readBigUInt64LE(at + 40));
    if (offset < PACK_MAGIC.length + RECORD_HEADER_BYTES || offset + length > packSize) continue;
    out.push({ digest: buf.toString('hex', at, at + 32), offset, length });
  }
  return out;
}

/** What a scan of a pack found. */
export interface PackScan {
  entries: PackEntry[];
  /** Where the valid records end: the start of a torn tail, or the pack's size. */
  end: number;
  /** A seal record was found (the owner appends nothing more). */
  sealed: boolean;
  /** The pack does not start with the pack magic. */
  badMagic: boolean;
}

/** Reads `length` bytes at `position` of whatever `read` reads (short at end of file). */
export type PositionedRead = (buf: Buffer, offset: number, length: number, position: number) => Promise<number>;

// Headers only; stops at the first bytes that are not a whole valid record (a torn tail).
export async function scanPack(read: PositionedRead, size: number, from = 0): Promise<PackScan> {
  const scan: PackScan = { entries: [], end: from, sealed: false, badMagic: false };
  let at = from;
  if (at === 0) {
    const magic = Buffer.alloc(PACK_MAGIC.length);
    if ((await readFully(read, magic, 0)) < magic.length || !magic.equals(PACK_MAGIC)) {
      scan.badMagic = true;
      return scan;
    }
    at = PACK_MAGIC.length;
    scan.end = at;
  }
  // Headers are read in 64 KiB windows, so small records cost no syscall each.
  const window = Buffer.allocUnsafe(64 * 1024);
  let winStart = -1;
  let winLen = 0;
  while (at + RECORD_HEADER_BYTES <= size) {
    if (winStart < 0 || at < winStart || at + RECORD_HEADER_BYTES > winStart + winLen) {
      winStart = at;
      winLen = await readFully(read, window, at);
    }
    const h = decodeRecordHeader(window.subarray(0, winLen), at - winStart);
    if (!h) break;
    const content = at + RECORD_HEADER_BYTES;
    if (h.type === RECORD_SEAL) {
      scan.sealed = true;
      scan.end = content;
      break;
    }
    if (content + h.length > size) break;
    scan.entries.push({ digest: h.digest, offset: content, length: h.length });
    at = content + h.length;
    scan.end = at;
  }
  return scan;
}

async function readFully(read: PositionedRead, buf: Buffer, position: number): Promise<number> {
  let got = 0;
  while (got < buf.length) {
    const n = await read(buf, got, buf.length - got, position + got);
    if (n === 0) break;
    got += n;
  }
  return got;
}
