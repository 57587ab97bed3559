/**
 * The bytes of an S3 pack object: one batch of small blobs, uploaded whole
 * by one create-once PUT and never rewritten. It is a directory pack
 * (store/pack-format.ts: magic, blob records, a seal record) followed by
 * its index and a footer, so a reader that knows only the key finds every
 * record with one ranged GET of the object's tail:
 *
 *     0        8  magic "SLPACK01"
 *     8           blob records, then a seal record (store/pack-format.ts)
 *     i           "SLPIDX01", then 48-byte entries (digest, offset, length)
 *     size-16  8  magic "SLPFOOT1"
 *     size-8   8  i (u64 LE)
 *
 * Entries are hints, as in a directory pack: a reader checks the record
 * header before the content and hashes the content before using it.
 */
import {
  decodeIndex,
  encodeIndexEntry,
  encodeRecordHeader,
  encodeRecords,
  PACK_INDEX_MAGIC,
  PACK_MAGIC,
  type PackEntry,
  RECORD_HEADER_BYTES,
} from '../pack-format.js';

const FOOTER_MAGIC = Buffer.from('SLPFOOT1', 'latin1');
/** Bytes of the footer. */
export const PACK_FOOTER_BYTES = 16;

/** The body of a pack object holding `blobs` in order, and where each one's content lies. */
export function encodePackObject(blobs: ReadonlyArray<{ digest: string; content: Uint8Array }>): {
  body: Buffer;
  entries: PackEntry[];
} {
  const bufs: Uint8Array[] = [PACK_MAGIC];
  const { entries, end } = encodeRecords(blobs, PACK_MAGIC.length, bufs);
  bufs.push(encodeRecordHeader(undefined, 0));
  const indexAt = end + RECORD_HEADER_BYTES;
  bufs.push(PACK_INDEX_MAGIC, ...entries.map(encodeIndexEntry));
  const footer = Buffer.alloc(PACK_FOOTER_BYTES);
  FOOTER_MAGIC.copy(footer, 0);
  footer.writeBigUInt64LE(BigInt(indexAt), 8);
  bufs.push(footer);
  return { body: Buffer.concat(bufs), entries };
}

/**
 * Where the index of a pack object of `size` bytes starts, from its last
 * {@link PACK_FOOTER_BYTES} bytes; undefined when they are not a footer.
 */
export function decodePackFooter(footer: Buffer, size: number): number | undefined {
  if (footer.length !== PACK_FOOTER_BYTES || !footer.subarray(0, 8).equals(FOOTER_MAGIC)) return undefined;
  const indexAt = footer.readBigUInt64LE(8);
  if (indexAt < BigInt(PACK_MAGIC.length + RECORD_HEADER_BYTES) || indexAt > BigInt(size - PACK_FOOTER_BYTES)) {
    return undefined;
  }
  return Number(indexAt);
}

/** The entries of the index bytes `[indexAt, size - footer)` of a pack object; undefined for a wrong magic. */
export function decodePackIndex(index: Buffer, indexAt: number): PackEntry[] | undefined {
  // decodeIndex drops entries past its bound: the records end where the index begins.
  return decodeIndex(index, indexAt);
}
