/**
 * An open store file as a plain descriptor on Node's callback fs API, with
 * the part of FileHandle the store uses: the main thread is the store's
 * bottleneck, and a FileHandle costs it about three times as much
 * (docs/benchmarks.md, "Per-call overhead").
 */
import {
  type BigIntStats,
  close,
  constants,
  fdatasync,
  fstat,
  fsync,
  ftruncate,
  open,
  read,
  type Stats,
  write,
  writev,
} from 'node:fs';

/**
 * Never through a symbolic link (a planted link must not make the store hash
 * a file elsewhere), never waiting on a FIFO (which would hold one of libuv's
 * threads forever); callers check with fstat that they got a regular file.
 */
export const READ_STORE_FILE = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

/** An open file of the store. Close it exactly once. */
export class StoreFile {
  private descriptor: number;
  /** Operations submitted and not finished: close waits for them, so their descriptor is never reused under them. */
  private inFlight = 0;
  private idle: (() => void) | undefined;

  /** @internal a subclass (store/s3/remote-file.ts) may stand for a file with no descriptor (-1). */
  protected constructor(fd: number) {
    this.descriptor = fd;
  }

  /** Opens `path` with numeric `flags` and `mode`. */
  static open(path: string, flags: number, mode?: number): Promise<StoreFile> {
    return new Promise((resolve, reject) => {
      open(path, flags, mode, (err, fd) => (err ? reject(err) : resolve(new StoreFile(fd))));
    });
  }

  /** The descriptor, or -1 once closed (as FileHandle reports it). */
  get fd(): number {
    return this.descriptor;
  }

  /** Reads into `buffer[offset, offset+length)` from `position`. */
  read<T extends NodeJS.ArrayBufferView>(
    buffer: T,
    offset: number,
    length: number,
    position: number | null,
  ): Promise<{ bytesRead: number; buffer: T }> {
    return this.track((done) =>
      read(this.live(), buffer, offset, length, position, (err, n) => done(err, { bytesRead: n, buffer })),
    );
  }

  /** Writes `buffer[offset, offset+length)` at `position` (null: the current offset, the end under O_APPEND). */
  write<T extends NodeJS.ArrayBufferView>(
    buffer: T,
    offset: number,
    length: number,
    position: number | null,
  ): Promise<{ bytesWritten: number; buffer: T }> {
    return this.track((done) =>
      write(this.live(), buffer, offset, length, position, (err, n) => done(err, { bytesWritten: n, buffer })),
    );
  }

  /** Writes `buffers` in order at `position`; may be short. */
  writev(buffers: NodeJS.ArrayBufferView[], position: number): Promise<{ bytesWritten: number }> {
    return this.track((done) => writev(this.live(), buffers, position, (err, n) => done(err, { bytesWritten: n })));
  }

  /** Cuts the file to `length` bytes. */
  truncate(length: number): Promise<void> {
    return this.track((done) => ftruncate(this.live(), length, (err) => done(err, undefined)));
  }

  /** fsync(2). */
  sync(): Promise<void> {
    return this.track((done) => fsync(this.live(), (err) => done(err, undefined)));
  }

  /** fdatasync(2). */
  datasync(): Promise<void> {
    return this.track((done) => fdatasync(this.live(), (err) => done(err, undefined)));
  }

  /** fstat(2). */
  stat(): Promise<Stats>;
  stat(options: { bigint: true }): Promise<BigIntStats>;
  stat(options?: { bigint?: boolean }): Promise<Stats | BigIntStats> {
    return this.track<Stats | BigIntStats>((done) => {
      if (options?.bigint) fstat(this.live(), { bigint: true }, done);
      else fstat(this.live(), done);
    });
  }

  /** The whole file from offset 0, sized by fstat (callers bound the size first). */
  async readFile(): Promise<Buffer> {
    const { size } = await this.stat();
    const buf = Buffer.allocUnsafe(size);
    let off = 0;
    while (off < size) {
      const { bytesRead } = await this.read(buf, off, size - off, off);
      if (bytesRead === 0) break;
      off += bytesRead;
    }
    return off === size ? buf : buf.subarray(0, off);
  }

  /**
   * Closes the descriptor once the operations already submitted have
   * finished (as FileHandle does). The number is forgotten at once, so a use
   * after close fails with EBADF instead of touching a reused descriptor, and a
   * second close does nothing.
   */
  async close(): Promise<void> {
    const fd = this.descriptor;
    if (fd === -1) return;
    this.descriptor = -1;
    if (this.inFlight > 0) await new Promise<void>((resolve) => (this.idle = resolve));
    await new Promise<void>((resolve, reject) => close(fd, (err) => (err ? reject(err) : resolve())));
  }

  /** Runs one callback-style operation as a promise, counted while it is in flight. */
  private track<T>(start: (done: (err: NodeJS.ErrnoException | null, value: T) => void) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      start((err, value) => {
        if (--this.inFlight === 0 && this.idle) {
          const idle = this.idle;
          this.idle = undefined;
          idle();
        }
        if (err) reject(err);
        else resolve(value);
      });
      // Counted only once submitted: start() throws (EBADF) before submitting on a closed file.
      this.inFlight++;
    });
  }

  private live(): number {
    if (this.descriptor === -1) throw Object.assign(new Error('file is closed'), { code: 'EBADF', syscall: 'fd' });
    return this.descriptor;
  }
}
