/**
 * The one seam every blob read goes through: {@link openBlob} gives a
 * random-access handle on the bytes of blob `digest`, wherever the store's
 * backend keeps them (store/backend.ts: a file, a window into a pack, an
 * object). Pages, search, manifests, spill records, verify and GC read
 * through it and know nothing of packs or buckets (docs/store.md,
 * "Backends").
 *
 * A handle is not trusted content: store/integrity.ts hashes it before any
 * byte is returned to a reader.
 */
import { BadUriError } from '../engine/protocol/errors.js';
import type { StoreFile } from './file.js';
import type { PackLocation } from './pack-index.js';
import type { Store } from './store.js';
import { isDigest } from './uri.js';

/** What a handle's bytes are, for the integrity cache: a change of any part means "hash again". */
export interface BlobIdentity {
  /** Unique for these bytes while they are unchanged. */
  key: string;
  /** Bytes of the blob. */
  size: number;
  /** The bytes live in a regular file (a FIFO or device in a blob's place is not a blob). */
  isFile: boolean;
  /** Inode of the file holding them (a repairing verify moves only that file). */
  ino: number;
}

/** Random access to one blob's bytes. Close it exactly once. */
export interface BlobHandle {
  /** Reads into `buffer[offset, offset+length)` from blob byte `position`; 0 bytes at the blob's end. */
  read<T extends NodeJS.ArrayBufferView>(
    buffer: T,
    offset: number,
    length: number,
    position: number,
  ): Promise<{ bytesRead: number; buffer: T }>;
  /** The blob's size and identity now (fstat of what is open). */
  identity(): Promise<BlobIdentity>;
  /** Where the bytes are when they are packed (else undefined: a whole file). */
  readonly packed: PackLocation | undefined;
  /** Closes the descriptor (idempotent). */
  close(): Promise<void>;
}

/** A whole blob file as a handle. */
export function fileHandle(fh: StoreFile): BlobHandle {
  return {
    read: (buffer, offset, length, position) => fh.read(buffer, offset, length, position),
    identity: async () => {
      const st = await fh.stat({ bigint: true });
      return {
        key: `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`,
        size: Number(st.size),
        isFile: st.isFile(),
        ino: Number(st.ino),
      };
    },
    packed: undefined,
    close: () => fh.close(),
  };
}

/**
 * Opens blob `digest` for reading, wherever the store keeps it
 * (store/directory/read.ts, store/s3/backend.ts).
 *
 * @throws BadUriError (EBADURI) for a malformed digest; NotFoundError (ENOTFOUND) when no copy exists;
 *   IntegrityError (EINTEGRITY) for a symbolic link at the blob's address; DiskError (EDISK).
 */
export async function openBlob(store: Store, digest: string): Promise<BlobHandle> {
  assertDigest(digest);
  return store.backend.openBlob(digest);
}

/** @throws BadUriError (EBADURI) unless `digest` is 64 lowercase hex digits. */
export function assertDigest(digest: string): void {
  if (!isDigest(digest)) throw new BadUriError(`${JSON.stringify(digest)} is not a 64-character lowercase hex digest`);
}
