/**
 * Streaming blob publication: hashed and line-scanned as bytes arrive,
 * appended to a temporary file, placed at commit in the order write →
 * fsync(file) → rename → fsync(dir); a small blob goes to the pack instead.
 * Content is never held: index entries spill to a file of their own.
 */
import { createHash, type Hash } from 'node:crypto';
import { DigestMismatchError, toSluiceError } from '../engine/protocol/errors.js';
import type { ObjectPacks } from './backend.js';
import { crashPoint } from './crash-point.js';
import type { DirectoryPacks } from './directory/packs.js';
import { commitDurablePrefix } from './durable-prefix.js';
import type { StoreFile } from './file.js';
import { rememberWritten } from './integrity.js';
import { writeAll } from './io.js';
import { encodeIndexHeader, INDEX_HEADER_BYTES, INDEX_MIN_BLOB_BYTES, LineScanner } from './line-index.js';
import type { Placement } from './placement.js';
import type { Pin, Store } from './store.js';

/** What a committed blob is. */
export interface BlobInfo {
  /** SHA-256, 64 lowercase hex. */
  digest: string;
  bytes: number;
  /** Lines by the shared line rule. */
  lines: number;
  /** The content already existed and was not rewritten. */
  deduplicated: boolean;
}

/** Under IOV_MAX (1024 on Linux). */
const MAX_BATCH_CHUNKS = 512;

/** Flushing during a CPU-bound capture leaves the final fsync little (docs/benchmarks.md, "Capture"). */
const WRITEBACK_EVERY_BYTES = 32 * 1024 * 1024;

const INDEX_SPILL_ENTRIES = 4096;

/** One blob being written: {@link write} in order (each settles once on disk), then {@link commit} or {@link abort}. */
export class BlobWriter {
  private readonly store: Store;
  private readonly placement: Placement;
  private readonly packs: DirectoryPacks | undefined;
  private readonly objectPacks: ObjectPacks | undefined;
  /** Blobs up to this many bytes are packed (0: none). */
  private readonly packMax: number;
  private readonly hash: Hash = createHash('sha256');
  private readonly scanner = new LineScanner();
  private file: StoreFile | undefined;
  private filePath: string | undefined;
  private indexFile: StoreFile | undefined;
  private indexPath: string | undefined;
  private indexEntries = 0;
  private indexBytesWritten = 0;
  /** Counted per system call: after a failed write, exactly the prefix on the file. */
  private position = 0;
  private syncedUpTo = 0;
  /** A background fdatasync failed: the kernel may have dropped written pages, so no prefix is known good. */
  private syncFailed = false;
  /** This writer's ENOSPC made the store full; the store is told when this writer is done. */
  private cut = false;
  /** The index is a cache (rebuilt on first read): a failed spill drops it, never the blob. */
  private indexLost = false;
  private writeback: Promise<void> | undefined;
  private readonly queue: Array<{ chunk: Uint8Array; resolve: () => void; reject: (e: unknown) => void }> = [];
  private flushing: Promise<void> | undefined;
  private failure: unknown;
  private settled = false;
  private small: Uint8Array[] | undefined = [];

  /** @internal use {@link Store.writer}. */
  constructor(store: Store) {
    this.store = store;
    this.placement = store.placement;
    const packs = store.backend.packs;
    this.packs = packs && packs.maxBlobBytes > 0 ? packs : undefined;
    const objectPacks = store.backend.objectPacks;
    this.objectPacks = objectPacks && objectPacks.maxBlobBytes > 0 ? objectPacks : undefined;
    this.packMax = this.packs?.maxBlobBytes ?? this.objectPacks?.maxBlobBytes ?? 0;
    if (this.packMax === 0) this.small = undefined;
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
   * Accepts the next chunk, hashed and scanned now; settles once written
   * (the caller must not mutate it before). Chunks arriving during a write
   * share one writev, so throughput follows bandwidth, not latency.
   */
  write(chunk: Uint8Array): Promise<void> {
    if (this.settled) return Promise.reject(new Error('BlobWriter already committed or aborted'));
    if (this.failure !== undefined) return Promise.reject(this.failure);
    this.hash.update(chunk);
    this.scanner.push(chunk);
    if (this.small !== undefined) {
      if (this.scanner.bytes <= this.packMax) {
        // A copy, so the caller may reuse its chunk at once.
        this.small.push(Buffer.from(chunk));
        return Promise.resolve();
      }
      const held = this.small;
      this.small = undefined;
      for (const c of held) this.queue.push({ chunk: c, resolve: () => {}, reject: () => {} });
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ chunk, resolve, reject });
      if (!this.flushing) this.flushing = this.flush();
    });
  }

  private async flush(): Promise<void> {
    // Never synchronous: a flush ending before its first await would leave written() a settled
    // promise to await forever (write() assigns `flushing` after this returns).
    await undefined;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, MAX_BATCH_CHUNKS);
      try {
        if (this.failure !== undefined) throw this.failure;
        // Opening the file remakes the reserve of a full store first, which ends that state (store/space-reserve.ts).
        const fh = this.file ?? (await this.open());
        // The disk filled under another capture: this one stops too, so the reserve finishes calls.
        const full = this.placement.fullError();
        if (full) throw full;
        await this.writeBatch(
          fh,
          batch.map((q) => q.chunk),
        );
        if (
          this.position - this.syncedUpTo >= WRITEBACK_EVERY_BYTES &&
          !this.writeback &&
          this.placement.beginWriteback()
        )
          this.startWriteback(fh);
        if (this.scanner.pendingEntries >= INDEX_SPILL_ENTRIES) {
          if (this.indexLost) this.scanner.takeEntries();
          else
            await this.spillIndex().catch(() => {
              this.indexLost = true;
            });
        }
        for (const q of batch) q.resolve();
      } catch (err) {
        const first = this.failure === undefined;
        this.failure ??= toSluiceError(err, 'EDISK');
        const noSpace = (this.failure as { details?: { errno?: unknown } }).details?.errno === 'ENOSPC';
        // Once per writer: the store keeps its freed reserve for a cut capture until it is done.
        if (first && noSpace && !this.cut) this.cut = await this.placement.diskFull();
        for (const q of batch) q.reject(this.failure);
      }
    }
    this.flushing = undefined;
  }

  /** A failure fails the blob. */
  private startWriteback(fh: StoreFile): void {
    const upTo = this.position;
    this.writeback = this.store.io.datasync(fh).then(
      () => {
        this.placement.endWriteback();
        this.syncedUpTo = upTo;
        this.writeback = undefined;
      },
      (err: unknown) => {
        this.placement.endWriteback();
        // After a failed fsync the kernel may have dropped the pages and cleared the error.
        this.failure ??= toSluiceError(err, 'EDISK');
        this.syncFailed = true;
        this.writeback = undefined;
      },
    );
  }

  /** Resolves when every chunk accepted so far has been written or has failed ({@link error} then says so). */
  flushed(): Promise<void> {
    return this.written();
  }

  /** A background fdatasync may still run. */
  private async written(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private async drained(): Promise<void> {
    await this.written();
    await this.writeback;
  }

  /**
   * Waits for pending writes, checks `expectedDigest` when given, and
   * publishes; the temporary file goes either way. `deferred` lets a small
   * blob of an S3 store go up with the pin's later publishes: it is stored
   * once `pin.vouch()` resolves, not when this does (a directory store, and
   * a blob with a file of its own, are durable on return either way).
   */
  async commit(expectedDigest?: string, pin?: Pin, deferred = false): Promise<BlobInfo> {
    if (this.settled) throw new Error('BlobWriter already committed or aborted');
    this.settled = true;
    try {
      // Not the background fdatasync: a copy already stored never needs it.
      await this.written();
      if (this.failure !== undefined) throw this.failure;
      const digest = this.hash.digest('hex');
      if (expectedDigest !== undefined && expectedDigest !== digest) {
        throw new DigestMismatchError(`content hashes to ${digest}, not the expected ${expectedDigest}`, {
          expected: expectedDigest,
          actual: digest,
        });
      }
      const bytes = this.scanner.bytes;
      const lines = this.scanner.lines;
      if (this.small !== undefined && this.packs) return await this.commitPacked(this.packs, digest, bytes, lines, pin);
      if (this.small !== undefined && this.objectPacks) {
        const held = this.small;
        this.small = undefined;
        const content = held.length === 1 ? (held[0] as Uint8Array) : Buffer.concat(held);
        // No dedup: a copy elsewhere would need the tombstone handshake (a request) before it counts; a
        // second small copy costs bytes only, and the lease covers the new pack before its upload.
        crashPoint('capture-written');
        // Its `blob-renamed` is the upload's (store/s3/backend.ts), later than this when deferred.
        await this.objectPacks.publish(digest, content, lines, pin, deferred);
        return { digest, bytes, lines, deduplicated: false };
      }
      return await this.placeFile(digest, bytes, lines, pin, true);
    } catch (err) {
      throw toSluiceError(err, 'EDISK');
    } finally {
      await this.cleanup();
    }
  }

  /**
   * After a failed write, publishes the prefix on the temporary file
   * (store/durable-prefix.ts; each piece read back also goes to `sink`);
   * undefined when none can be trusted. The temporary file goes either way.
   */
  async commitWritten(pin: Pin | undefined, sink: (chunk: Uint8Array) => void): Promise<BlobInfo | undefined> {
    if (this.settled) throw new Error('BlobWriter already committed or aborted');
    if (this.failure === undefined || this.small !== undefined) throw new Error('commitWritten is for a failed write');
    this.settled = true;
    try {
      await this.drained();
      const bytes = this.position;
      if (this.syncFailed || bytes === 0 || this.file === undefined) return undefined;
      const { io, backend } = this.store;
      const path = this.filePath as string;
      const { digest, lines } = await commitDurablePrefix(io, this.file, path, bytes, backend.placesLocally, sink);
      return await this.placeFile(digest, bytes, lines, pin, false);
    } catch (err) {
      throw toSluiceError(err, 'EDISK');
    } finally {
      await this.cleanup();
    }
  }

  /** Deduplicates against an intact copy, else places the file; a cut prefix gets no line index. */
  private async placeFile(
    digest: string,
    bytes: number,
    lines: number,
    pin: Pin | undefined,
    complete: boolean,
  ): Promise<BlobInfo> {
    // Pinned before the blob is ours to reference (a GC that sees it sees the pin), then the wait
    // for a collection elsewhere: the publisher's half of the handshake.
    await pin?.add([digest]);
    if (pin) await this.store.backend.settle(digest);
    if (await this.store.backend.refreshBlob(digest, bytes)) {
      // Here, not in the cleanup: a failing unlink fails the publish, not leaves a copy in tmp/.
      crashPoint('capture-written');
      if (this.filePath !== undefined) await this.store.io.unlink(this.filePath);
      this.filePath = undefined;
      // Closed off the call's path: a close waits for the background fdatasync nobody needs now.
      const copy = this.file;
      this.file = undefined;
      void copy?.close().catch(() => {});
      await pin?.vouch();
      return { digest, bytes, lines, deduplicated: true };
    }
    if (complete) {
      // Our copy is the blob: its background fdatasync must have succeeded, or the final fsync proves nothing.
      await this.writeback;
      if (this.failure !== undefined) throw this.failure;
    }
    const fh = this.file ?? (await this.open());
    if (complete && this.store.backend.placesLocally) await this.store.io.fsync(fh);
    crashPoint('capture-written');
    const placed = await this.store.backend.placeBlob(this.filePath as string, digest);
    crashPoint('blob-renamed');
    this.filePath = undefined;
    // Hashed while written; its identity from the descriptor after the rename, or the object on S3.
    await rememberWritten(this.store, digest, placed ?? fh, lines);
    await fh.close();
    this.file = undefined;
    if (complete) await this.placeIndex(digest, bytes, lines);
    // A store fenced while it uploaded (its lease reclaimed) cannot say the blob will stay.
    await pin?.vouch();
    return { digest, bytes, lines, deduplicated: false };
  }

  /**
   * Deduplicates against a confirmed-intact packed copy, else appends to the
   * pack, pinned first; a copy in our own unsealed pack only in memory
   * ({@link Pin.holdInOwnPack}). A blob file of the same content is not
   * looked for: a second copy is harmless, a stat per publish is not.
   */
  private async commitPacked(
    packs: DirectoryPacks,
    digest: string,
    bytes: number,
    lines: number,
    pin: Pin | undefined,
  ): Promise<BlobInfo> {
    const held = this.small as Uint8Array[];
    this.small = undefined;
    const inMemory = pin?.holdInOwnPack;
    if (packs.ownActiveCopy(digest, bytes)) {
      if (inMemory) inMemory([digest]);
      else await pin?.add([digest]);
      crashPoint('capture-written');
      return { digest, bytes, lines, deduplicated: true };
    }
    if (await packs.knows(digest)) {
      await pin?.add([digest]);
      if (await packs.refresh(digest, bytes)) {
        crashPoint('capture-written');
        return { digest, bytes, lines, deduplicated: true };
      }
    } else if (inMemory) inMemory([digest]);
    else await pin?.add([digest]);
    crashPoint('capture-written');
    const content = held.length === 1 ? (held[0] as Uint8Array) : Buffer.concat(held);
    await packs.append(digest, content, lines);
    crashPoint('blob-renamed');
    return { digest, bytes, lines, deduplicated: false };
  }

  /** Discards everything written; the temporary files are removed. */
  async abort(): Promise<void> {
    if (this.settled) return;
    this.settled = true;
    this.small = undefined;
    await this.drained();
    await this.cleanup();
  }

  private async open(): Promise<StoreFile> {
    const { handle, path } = await this.placement.createTemp('blob');
    this.file = handle;
    this.filePath = path;
    return handle;
  }

  private async spillIndex(): Promise<void> {
    const entries = this.scanner.takeEntries();
    if (entries.length === 0) return;
    if (this.indexFile === undefined) {
      const { handle, path } = await this.placement.createTemp('idx');
      this.indexFile = handle;
      this.indexPath = path;
      this.indexBytesWritten = INDEX_HEADER_BYTES;
    }
    await writeAll(this.store.io, this.indexFile, entries, this.indexBytesWritten);
    this.indexBytesWritten += entries.length;
    this.indexEntries += entries.length / 16;
  }

  /** The index is a cache: failures here never fail the publish. */
  private async placeIndex(digest: string, bytes: number, lines: number): Promise<void> {
    if (bytes < INDEX_MIN_BLOB_BYTES || this.indexLost) return;
    try {
      await this.spillIndex();
      if (this.indexFile === undefined) {
        const { handle, path } = await this.placement.createTemp('idx');
        this.indexFile = handle;
        this.indexPath = path;
      }
      await writeAll(this.store.io, this.indexFile, encodeIndexHeader(bytes, lines, this.indexEntries), 0);
      await this.indexFile.close();
      this.indexFile = undefined;
      await this.store.backend.placeIndex(this.indexPath as string, digest);
      this.indexPath = undefined;
    } catch {
      // A missing index is rebuilt on first read.
    }
  }

  /** Advances per system call, so after a failure it counts exactly the bytes on the file. */
  private async writeBatch(fh: StoreFile, bufs: Uint8Array[]): Promise<void> {
    let i = 0;
    let off = 0;
    if (bufs.length > 1) {
      let n = await this.store.io.writev(fh, bufs, this.position);
      this.position += n;
      while (i < bufs.length && n >= (bufs[i] as Uint8Array).length) n -= (bufs[i++] as Uint8Array).length;
      off = n;
    }
    for (; i < bufs.length; i++, off = 0) {
      const b = bufs[i] as Uint8Array;
      while (off < b.length) {
        const n = await this.store.io.write(fh, b, off, b.length - off, this.position);
        // No progress would loop forever.
        if (!(n > 0)) throw Object.assign(new Error('write made no progress'), { code: 'EIO', syscall: 'write' });
        off += n;
        this.position += n;
      }
    }
  }

  private async cleanup(): Promise<void> {
    if (this.cut) {
      this.cut = false;
      this.placement.cutDone();
    }
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
