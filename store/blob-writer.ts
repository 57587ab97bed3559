/**
 * Streaming blob publication: bytes are hashed and line-scanned as they
 * arrive, appended to a temporary file inside the store, and at commit moved
 * into their content address in the durable order
 * write → fsync(file) → rename → fsync(dir).
 *
 * A blob that stays within the store's packMaxBlobBytes never gets a file: its bytes
 * are held (copied) until commit and appended to the store's pack, whose
 * group commit shares one fdatasync among every publish of a batch
 * (store/pack-writer.ts). The first chunk that takes it past the bound
 * writes what was held to a temporary file, and it goes on as a file.
 *
 * Memory is bounded by what the caller has in flight: nothing here keeps the
 * content, and line-index entries are spilled to their own temporary file in
 * batches.
 */
import { createHash, type Hash } from 'node:crypto';
import { constants } from 'node:fs';
import { DigestMismatchError, toSluiceError } from '../engine/protocol/errors.js';
import { crashPoint } from './crash-point.js';
import type { DirectoryPacks } from './directory/packs.js';
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
  /** Size in bytes. */
  bytes: number;
  /** Lines by the shared line rule. */
  lines: number;
  /** True when the content already existed and was not rewritten. */
  deduplicated: boolean;
}

/** At most this many chunks in one writev (IOV_MAX is 1024 on Linux). */
const MAX_BATCH_CHUNKS = 512;

/**
 * Start an fdatasync in the background after this many bytes. A capture is
 * CPU-bound well below what the disk takes, so flushing while it runs leaves
 * the final fsync (which the publication waits for) little to do
 * (docs/benchmarks.md, "Capture").
 */
const WRITEBACK_EVERY_BYTES = 32 * 1024 * 1024;

/** Pieces in which commitWritten reads a cut capture back. */
const READ_BACK_BYTES = 1024 * 1024;

/** Spill index entries once this many are pending. */
const INDEX_SPILL_ENTRIES = 4096;

/**
 * One blob being written. Call {@link write} in order (each promise settles
 * when that chunk is on disk, which is when its backpressure credit may be
 * returned), then exactly one of {@link commit} or {@link abort}.
 */
export class BlobWriter {
  private readonly store: Store;
  /** The store's local writing side (store/placement.ts). */
  private readonly placement: Placement;
  /** The store's packs, when it packs small blobs (a directory store's). */
  private readonly packs: DirectoryPacks | undefined;
  private readonly hash: Hash = createHash('sha256');
  private readonly scanner = new LineScanner();
  private file: StoreFile | undefined;
  private filePath: string | undefined;
  private indexFile: StoreFile | undefined;
  private indexPath: string | undefined;
  private indexEntries = 0;
  private indexBytesWritten = 0;
  /** Bytes on the temporary file, counted per system call: after a failed write, the written prefix. */
  private position = 0;
  private syncedUpTo = 0;
  /** A background fdatasync failed: the kernel may have dropped written pages, so no prefix is known good. */
  private syncFailed = false;
  /** This writer's ENOSPC made the store full: the store is told when it has published or aborted. */
  private cut = false;
  /** Spilling the line index failed: it is dropped (rebuilt on first read) instead of failing the blob. */
  private indexLost = false;
  private writeback: Promise<void> | undefined;
  private readonly queue: Array<{ chunk: Uint8Array; resolve: () => void; reject: (e: unknown) => void }> = [];
  private flushing: Promise<void> | undefined;
  private failure: unknown;
  private settled = false;
  /** Copies of the chunks of a blob still small enough to be packed; undefined once it has a file. */
  private small: Uint8Array[] | undefined = [];

  /** @internal use {@link Store.writer}. */
  constructor(store: Store) {
    this.store = store;
    this.placement = store.placement;
    const packs = store.backend.packs;
    this.packs = packs && packs.maxBlobBytes > 0 ? packs : undefined;
    if (!this.packs) this.small = undefined;
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
   *
   * Chunks that arrive while a write is in flight are gathered and written
   * with one writev: one chunk per syscall would make capture throughput a
   * function of disk latency instead of bandwidth.
   */
  write(chunk: Uint8Array): Promise<void> {
    if (this.settled) return Promise.reject(new Error('BlobWriter already committed or aborted'));
    if (this.failure !== undefined) return Promise.reject(this.failure);
    this.hash.update(chunk);
    this.scanner.push(chunk);
    if (this.small !== undefined) {
      if (this.scanner.bytes <= (this.packs?.maxBlobBytes ?? 0)) {
        // Held in memory (bounded by the pack threshold), so the caller may reuse its chunk at once.
        this.small.push(Buffer.from(chunk));
        return Promise.resolve();
      }
      // Too large for a pack: what was held goes to the temporary file first, in order.
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
    // Never done synchronously: write() assigns this promise to `flushing` after the call returns, and
    // the loop clears `flushing` when it ends, so a flush that could end before its first await (every
    // batch failing at once) would leave a settled promise there that written() waits on forever.
    await undefined;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, MAX_BATCH_CHUNKS);
      try {
        if (this.failure !== undefined) throw this.failure;
        // Opening the capture file makes the reserve again first if the store was full, which is
        // what ends that state (store/space-reserve.ts).
        const fh = this.file ?? (await this.open());
        // The disk filled under another capture and has no room yet: this one stops too, so the
        // freed reserve finishes calls instead of feeding whichever capture writes next.
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
          // The index is a cache, rebuilt on first read: failing to write it never fails the blob.
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
        // Counted once per writer as a cut capture: the store keeps its freed reserve for it until it is done.
        if (first && noSpace && !this.cut) this.cut = await this.placement.diskFull();
        for (const q of batch) q.reject(this.failure);
      }
    }
    this.flushing = undefined;
  }

  /** Flushes what is written so far without waiting for it; a failure fails the blob. */
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
        // Fails the blob: after a failed fsync the kernel may have dropped the dirty pages and
        // cleared the error, so a later fsync that succeeds would not prove the bytes are on disk.
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

  /** Resolves when every accepted chunk has been written (or failed); a background fdatasync may still run. */
  private async written(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  /** Resolves when every accepted chunk has been written and the background fdatasync, if any, has ended. */
  private async drained(): Promise<void> {
    await this.written();
    await this.writeback;
  }

  /**
   * Finishes the blob: waits for pending writes, checks `expectedDigest` when
   * given, and publishes. The temporary file is gone afterwards whatever happens.
   */
  async commit(expectedDigest?: string, pin?: Pin): Promise<BlobInfo> {
    if (this.settled) throw new Error('BlobWriter already committed or aborted');
    this.settled = true;
    try {
      // Not the background fdatasync yet: a copy that turns out to be stored already never needs it.
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
      return await this.placeFile(digest, bytes, lines, pin, true);
    } catch (err) {
      throw toSluiceError(err, 'EDISK');
    } finally {
      await this.cleanup();
    }
  }

  /**
   * After a failed write (a full disk), publishes the prefix of the accepted
   * bytes that reached the temporary file, the bytes past it being lost:
   * the file is cut to that prefix, fsynced, read back to hash it and count
   * its lines (each chunk read is also handed to `sink`, so a caller can
   * rebuild what it derived from the lost bytes), and placed as the blob.
   * Resolves to undefined when no prefix can be trusted (nothing reached
   * the file, or a background fdatasync failed); throws when placing it
   * fails. The temporary file is gone afterwards whatever happens.
   */
  async commitWritten(pin: Pin | undefined, sink: (chunk: Uint8Array) => void): Promise<BlobInfo | undefined> {
    if (this.settled) throw new Error('BlobWriter already committed or aborted');
    if (this.failure === undefined || this.small !== undefined) throw new Error('commitWritten is for a failed write');
    this.settled = true;
    try {
      await this.drained();
      const bytes = this.position;
      if (this.syncFailed || bytes === 0 || this.file === undefined) return undefined;
      await this.store.io.truncate(this.file, bytes);
      if (this.store.backend.placesLocally) await this.store.io.fsync(this.file);
      const { digest, lines } = await this.readBack(bytes, sink);
      return await this.placeFile(digest, bytes, lines, pin, false);
    } catch (err) {
      throw toSluiceError(err, 'EDISK');
    } finally {
      await this.cleanup();
    }
  }

  /** SHA-256 and line count of the first `bytes` of the temporary file, read in 1 MiB pieces. */
  private async readBack(bytes: number, sink: (chunk: Uint8Array) => void): Promise<{ digest: string; lines: number }> {
    const hash = createHash('sha256');
    const scanner = new LineScanner();
    const fh = await this.store.io.open(this.filePath as string, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      let at = 0;
      while (at < bytes) {
        const buf = Buffer.allocUnsafe(Math.min(READ_BACK_BYTES, bytes - at));
        const { bytesRead } = await fh.read(buf, 0, buf.length, at);
        if (bytesRead === 0) throw Object.assign(new Error('capture file shorter than written'), { code: 'EIO' });
        const piece = buf.subarray(0, bytesRead);
        hash.update(piece);
        scanner.push(piece);
        sink(piece);
        at += bytesRead;
      }
    } finally {
      await fh.close();
    }
    return { digest: hash.digest('hex'), lines: scanner.lines };
  }

  /**
   * Publishes the temporary file as blob `digest`: deduplicated against an
   * intact stored copy, else placed and remembered as verified. A `complete`
   * blob (every accepted byte) is fsynced here and gets its line index; a
   * cut prefix was fsynced by commitWritten, and its index, which would
   * describe bytes it does not have, is rebuilt on first read instead.
   */
  private async placeFile(
    digest: string,
    bytes: number,
    lines: number,
    pin: Pin | undefined,
    complete: boolean,
  ): Promise<BlobInfo> {
    // Pinned before the blob is ours to reference (refreshed or placed), so a concurrent GC that
    // sees it also sees the pin.
    await pin?.add([digest]);
    // Pinned (an S3 store: the lease stored) THEN the backend's wait for a collection elsewhere: the
    // publisher's half of the handshake.
    if (pin) await this.store.backend.settle(digest);
    if (await this.store.backend.refreshBlob(digest, bytes)) {
      // Already stored: our copy never needs to reach the disk. It is removed here, not in the
      // best-effort cleanup, so a failing unlink fails the publish instead of leaving it in tmp/.
      crashPoint('capture-written');
      if (this.filePath !== undefined) await this.store.io.unlink(this.filePath);
      this.filePath = undefined;
      // Closed off the call's path: a close waits for the background fdatasync in flight, whose
      // bytes nobody needs now (it still finishes; the kernel drops the unlinked file's other dirty
      // pages at its last close; docs/benchmarks.md, "Capture").
      const copy = this.file;
      this.file = undefined;
      void copy?.close().catch(() => {});
      await pin?.vouch();
      return { digest, bytes, lines, deduplicated: true };
    }
    if (complete) {
      // Our copy is the blob: its background fdatasync must have succeeded (after a failed one the
      // kernel may have dropped the pages, so the final fsync alone would prove nothing).
      await this.writeback;
      if (this.failure !== undefined) throw this.failure;
    }
    const fh = this.file ?? (await this.open());
    if (complete && this.store.backend.placesLocally) await this.store.io.fsync(fh);
    crashPoint('capture-written');
    const placed = await this.store.backend.placeBlob(this.filePath as string, digest);
    crashPoint('blob-renamed');
    this.filePath = undefined;
    // Hashed while written (or read back): the placed file is known good, so a later dedup or read
    // need not hash it. Its identity is taken from the still-open descriptor, after the rename (which
    // changes its ctime), or, in an S3 store, from the uploaded object.
    await rememberWritten(this.store, digest, placed ?? fh, lines);
    await fh.close();
    this.file = undefined;
    if (complete) await this.placeIndex(digest, bytes, lines);
    // A store fenced while it uploaded (its lease reclaimed) cannot say the blob will stay.
    await pin?.vouch();
    return { digest, bytes, lines, deduplicated: false };
  }

  /**
   * Publishes a small blob: deduplicated against a packed copy this store
   * can confirm intact, else appended to the store's pack.
   *
   * Pinned before the copy is ours to reference, as a file blob is, so a
   * concurrent GC that sees the copy also sees the pin; but a copy in this
   * store's own unsealed pack (one it appended before, or the one it appends
   * now) is pinned in memory only ({@link Pin.holdInOwnPack}): no collection
   * rewrites that pack while this process lives, and the holds reach the
   * journal before the pack is sealed. So the common small publish writes
   * nothing to the pin journal. A blob file of the same content is not
   * looked for: a second, packed copy is harmless, a stat per publish is not.
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

  /** Writes the index of a large blob beside it. It is a cache: failures here never fail the publish. */
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

  /**
   * Writes all of `bufs` at {@link position} with writev, finishing short
   * writes with plain writes. `position` advances with each system call, so
   * when one fails it counts exactly the bytes that reached the file.
   */
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
        // A write that makes no progress would loop forever, so it is the EIO it is.
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
