/**
 * An S3 object as a random-access {@link StoreFile}, each read a ranged GET,
 * so a page costs O(page) from the service. One block buffer per handle: a
 * continuing read fetches SEQUENTIAL_BLOCK (fewer GETs for the hashing
 * pass), others RANDOM_BLOCK. Every GET carries `If-Match` with the ETag
 * seen at open, so one handle's bytes are of one version.
 */
import { createHash } from 'node:crypto';
import type { BigIntStats, Stats } from 'node:fs';
import { StoreFile } from '../file.js';
import type { ObjectHead, S3Objects } from './objects.js';
import type { CacheTee } from './read-cache.js';

/** Smallest GET of a read that does not continue the previous one. */
const RANDOM_BLOCK = 256 * 1024;
/** GET size of reads that continue the previous one (sequential scans). */
const SEQUENTIAL_BLOCK = 4 * 1024 * 1024;

/** A device number no local filesystem reports, so remote identities never equal a local file's. */
const REMOTE_DEV = 0x5333n;

/** See the module comment. Read-only: the writing methods fail with EBADF like a closed file's. */
export class RemoteFile extends StoreFile {
  private block: { start: number; data: Buffer } | undefined;
  private lastEnd = -1;
  private cursor = 0;
  private queue: Promise<unknown> = Promise.resolve();
  private open = true;

  /** `head` is what HEAD said of `key` when it was opened (its size and ETag are the file's identity). */
  constructor(
    private readonly objects: S3Objects,
    /** The object's key. */
    readonly key: string,
    /** What HEAD said at open. */
    readonly head: ObjectHead,
    /** Where the blocks fetched go as well, to make a local copy (store/s3/read-cache.ts). */
    private readonly tee?: CacheTee,
  ) {
    super(-1);
  }

  /** Size in bytes of the object as opened. */
  get size(): number {
    return this.head.size;
  }

  override read<T extends NodeJS.ArrayBufferView>(
    buffer: T,
    offset: number,
    length: number,
    position: number | null,
  ): Promise<{ bytesRead: number; buffer: T }> {
    // One GET at a time per handle: the two reads a sequential reader keeps in flight share a block.
    const run = this.queue.then(() => this.readNow(buffer, offset, length, position ?? this.cursor));
    this.queue = run.catch(() => {});
    return run;
  }

  private async readNow<T extends NodeJS.ArrayBufferView>(
    buffer: T,
    offset: number,
    length: number,
    position: number,
  ): Promise<{ bytesRead: number; buffer: T }> {
    if (!this.open) throw Object.assign(new Error('file is closed'), { code: 'EBADF', syscall: 'read' });
    const size = this.head.size;
    if (length <= 0 || position >= size) return { bytesRead: 0, buffer };
    const want = Math.min(length, size - position);
    let b = this.block;
    if (!b || position < b.start || position >= b.start + b.data.length) {
      const span = Math.max(want, position === this.lastEnd ? SEQUENTIAL_BLOCK : RANDOM_BLOCK);
      const data = await this.objects.getRange(this.key, position, Math.min(size, position + span), this.head.etag);
      b = { start: position, data };
      this.block = b;
      await this.tee?.take(position, data);
    }
    const from = position - b.start;
    const n = Math.min(want, b.data.length - from);
    new Uint8Array(buffer.buffer, buffer.byteOffset + offset, n).set(b.data.subarray(from, from + n));
    this.lastEnd = position + n;
    this.cursor = position + n;
    return { bytesRead: n, buffer };
  }

  /**
   * Device and inode stand for the ETag, so the integrity cache's identity
   * changes exactly when the object does. Times are zero: a PUT answers with
   * no Last-Modified, and the publisher's identity must equal a later open's.
   */
  override stat(): Promise<Stats>;
  override stat(options: { bigint: true }): Promise<BigIntStats>;
  override stat(options?: { bigint?: boolean }): Promise<Stats | BigIntStats> {
    const ino = etagInode(this.head.etag);
    const size = this.head.size;
    const isFile = () => true;
    if (options?.bigint) {
      return Promise.resolve({
        dev: REMOTE_DEV,
        ino,
        size: BigInt(size),
        mtimeNs: 0n,
        ctimeNs: 0n,
        isFile,
      } as unknown as BigIntStats);
    }
    return Promise.resolve({ dev: Number(REMOTE_DEV), ino: Number(ino), size, mtimeMs: 0, isFile } as unknown as Stats);
  }

  /** Drops the block (and an unfinished cache copy); later reads fail with EBADF. */
  override async close(): Promise<void> {
    this.open = false;
    await this.queue;
    this.block = undefined;
    // An unfinished copy is given up, its temporary file removed.
    await this.tee?.abandon();
  }
}

/** 48 bits of the ETag's hash: an inode-like number that is safe as a JavaScript number too. */
function etagInode(etag: string): bigint {
  return BigInt(`0x${createHash('sha256').update(etag).digest('hex').slice(0, 12)}`);
}
