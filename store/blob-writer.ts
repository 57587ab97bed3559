/**
 * Streaming blob publication: bytes are hashed and line-scanned as they
 * arrive, appended to a temporary file inside the store, and at commit moved
 * into their content address in the durable order
 * write → fsync(file) → rename → fsync(dir).
 *
 * Memory is bounded by what the caller has in flight: nothing here keeps the
 * content, and line-index entries are spilled to their own temporary file in
 * batches.
 */
import { createHash, type Hash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { DigestMismatchError, toSluiceError } from '../engine/protocol/errors.js';
import { encodeIndexHeader, INDEX_HEADER_BYTES, INDEX_MIN_BLOB_BYTES, LineScanner } from './line-index.js';
import type { Store } from './store.js';

/** What a committed blob is. */
export interface BlobInfo {
  /** SHA-256, 64 lowercase hex. */
  digest: string;
  /** Size in bytes. */
  bytes: number;
  /** Lines by the shared line rule. */
  lines: number;
  /** True when the content already existed and was not rewritten. */
  deduplicated: boolean;
}

/** Spill index entries once this many are pending. */
const INDEX_SPILL_ENTRIES = 4096;

/**
 * One blob being written. Call {@link write} in order (each promise settles
 * when that chunk is on disk, which is when its backpressure credit may be
 * returned), then exactly one of {@link commit} or {@link abort}.
 */
export class BlobWriter {
  private readonly store: Store;
  private readonly hash: Hash = createHash('sha256');
  private readonly scanner = new LineScanner();
  private file: FileHandle | undefined;
  private filePath: string | undefined;
  private indexFile: FileHandle | undefined;
  private indexPath: string | undefined;
  private indexEntries = 0;
  private indexBytesWritten = 0;
  private position = 0;
  private tail: Promise<void> = Promise.resolve();
  private failure: unknown;
  private settled = false;

  /** @internal use {@link Store.writer}. */
  constructor(store: Store) {
    this.store = store;
  }

  /** Bytes accepted so far. */
  get bytes(): number {
    return this.scanner.bytes;
  }

  /** Lines accepted so far. */
  get lines(): number {
    return this.scanner.lines;
  }

  /** The first write error, if any (later writes fail fast with it). */
  get error(): unknown {
    return this.failure;
  }

  /**
   * Accepts the next chunk. The chunk is hashed and scanned now; the returned
   * promise settles when it has been written. The caller must not mutate the
   * chunk until then.
   */
  write(chunk: Uint8Array): Promise<void> {
    if (this.settled) return Promise.reject(new Error('BlobWriter already committed or aborted'));
    if (this.failure !== undefined) return Promise.reject(this.failure);
    this.hash.update(chunk);
    this.scanner.push(chunk);
    const spill = this.scanner.pendingEntries >= INDEX_SPILL_ENTRIES;
    const next = this.tail.then(async () => {
      if (this.failure !== undefined) throw this.failure;
      try {
        const fh = this.file ?? (await this.open());
        let off = 0;
        while (off < chunk.length) {
          const bytesWritten = await this.store.io.write(fh, chunk, off, chunk.length - off, this.position);
          off += bytesWritten;
          this.position += bytesWritten;
        }
        if (spill) await this.spillIndex();
      } catch (err) {
        this.failure ??= toSluiceError(err, 'EDISK');
        throw this.failure;
      }
    });
    // The chain itself must never reject, or one failure would poison unrelated awaits.
    this.tail = next.catch(() => {});
    return next;
  }

  /**
   * Finishes the blob: waits for pending writes, checks `expectedDigest` when
   * given, and publishes. The temporary file is gone afterwards whatever happens.
   */
  async commit(expectedDigest?: string): Promise<BlobInfo> {
    if (this.settled) throw new Error('BlobWriter already committed or aborted');
    this.settled = true;
    try {
      await this.tail;
      if (this.failure !== undefined) throw this.failure;
      const digest = this.hash.digest('hex');
      if (expectedDigest !== undefined && expectedDigest !== digest) {
        throw new DigestMismatchError(`content hashes to ${digest}, not the expected ${expectedDigest}`, {
          expected: expectedDigest,
          actual: digest,
        });
      }
      const fh = this.file ?? (await this.open());
      await this.store.io.fsync(fh);
      await fh.close();
      this.file = undefined;
      const bytes = this.scanner.bytes;
      const lines = this.scanner.lines;
      const deduplicated = await this.store.placeBlob(this.filePath as string, digest, bytes);
      this.filePath = undefined;
      if (!deduplicated) await this.placeIndex(digest, bytes, lines);
      return { digest, bytes, lines, deduplicated };
    } catch (err) {
      throw toSluiceError(err, 'EDISK');
    } finally {
      await this.cleanup();
    }
  }

  /** Discards everything written; the temporary files are removed. */
  async abort(): Promise<void> {
    if (this.settled) return;
    this.settled = true;
    await this.tail;
    await this.cleanup();
  }

  private async open(): Promise<FileHandle> {
    const { handle, path } = await this.store.createTemp('blob');
    this.file = handle;
    this.filePath = path;
    return handle;
  }

  private async spillIndex(): Promise<void> {
    const entries = this.scanner.takeEntries();
    if (entries.length === 0) return;
    if (this.indexFile === undefined) {
      const { handle, path } = await this.store.createTemp('idx');
      this.indexFile = handle;
      this.indexPath = path;
      this.indexBytesWritten = INDEX_HEADER_BYTES;
    }
    await this.store.io.write(this.indexFile, entries, 0, entries.length, this.indexBytesWritten);
    this.indexBytesWritten += entries.length;
    this.indexEntries += entries.length / 16;
  }

  /** Writes the index of a large blob beside it. It is a cache: failures here never fail the publish. */
  private async placeIndex(digest: string, bytes: number, lines: number): Promise<void> {
    if (bytes < INDEX_MIN_BLOB_BYTES) return;
    try {
      await this.spillIndex();
      if (this.indexFile === undefined) {
        const { handle, path } = await this.store.createTemp('idx');
        this.indexFile = handle;
        this.indexPath = path;
      }
      await this.indexFile.write(encodeIndexHeader(bytes, lines, this.indexEntries), 0, INDEX_HEADER_BYTES, 0);
      await this.indexFile.close();
      this.indexFile = undefined;
      await this.store.placeIndex(this.indexPath as string, digest);
      this.indexPath = undefined;
    } catch {
      // A missing index is rebuilt on first read.
    }
  }

  private async cleanup(): Promise<void> {
    for (const fh of [this.file, this.indexFile]) {
      if (fh) await fh.close().catch(() => {});
    }
    this.file = undefined;
    this.indexFile = undefined;
    for (const p of [this.filePath, this.indexPath]) {
      if (p) await this.store.io.unlink(p).catch(() => {});
    }
    this.filePath = undefined;
    this.indexPath = undefined;
  }
}
