/**
 * An open store file as a plain descriptor driven through Node's callback fs
 * API. It offers the part of `fs/promises` FileHandle the store uses, with the
 * same result shapes, because the main thread is the store's bottleneck and a
 * FileHandle operation costs it about three times the callback one (promise
 * request objects, handle bookkeeping and a close that goes through both):
 * measured 135 vs 47 µs of main-thread time per open+write+close
 * (docs/benchmarks.md). Every method still runs on libuv's thread pool.
 */
import { type BigIntStats, close, fdatasync, fstat, fsync, open, read, type Stats, write, writev } from 'node:fs';

/** An open file of the store. Close it exactly once. */
export class StoreFile {
  private descriptor: number;

  private constructor(fd: number) {
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
    return new Promise((resolve, reject) => {
      read(this.live(), buffer, offset, length, position, (err, bytesRead) =>
        err ? reject(err) : resolve({ bytesRead, buffer }),
      );
    });
  }

  /** Writes `buffer[offset, offset+length)` at `position` (null: the current offset, the end under O_APPEND). */
  write<T extends NodeJS.ArrayBufferView>(
    buffer: T,
    offset: number,
    length: number,
    position: number | null,
  ): Promise<{ bytesWritten: number; buffer: T }> {
    return new Promise((resolve, reject) => {
      write(this.live(), buffer, offset, length, position, (err, bytesWritten) =>
        err ? reject(err) : resolve({ bytesWritten, buffer }),
      );
    });
  }

  /** Writes `buffers` in order at `position`; may be short. */
  writev(buffers: NodeJS.ArrayBufferView[], position: number): Promise<{ bytesWritten: number }> {
    return new Promise((resolve, reject) => {
      writev(this.live(), buffers, position, (err, bytesWritten) => (err ? reject(err) : resolve({ bytesWritten })));
    });
  }

  /** fsync(2). */
  sync(): Promise<void> {
    return new Promise((resolve, reject) => fsync(this.live(), (err) => (err ? reject(err) : resolve())));
  }

  /** fdatasync(2). */
  datasync(): Promise<void> {
    return new Promise((resolve, reject) => fdatasync(this.live(), (err) => (err ? reject(err) : resolve())));
  }

  /** fstat(2). */
  stat(): Promise<Stats>;
  stat(options: { bigint: true }): Promise<BigIntStats>;
  stat(options?: { bigint?: boolean }): Promise<Stats | BigIntStats> {
    return new Promise((resolve, reject) => {
      const done = (err: NodeJS.ErrnoException | null, st: Stats | BigIntStats) => (err ? reject(err) : resolve(st));
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
   * Closes the descriptor. The number is forgotten first, so a second close
   * (or a use after close) fails with EBADF instead of touching a reused one.
   */
  close(): Promise<void> {
    const fd = this.descriptor;
    if (fd === -1) return Promise.resolve();
    this.descriptor = -1;
    return new Promise((resolve, reject) => close(fd, (err) => (err ? reject(err) : resolve())));
  }

  private live(): number {
    if (this.descriptor === -1) throw Object.assign(new Error('file is closed'), { code: 'EBADF', syscall: 'fd' });
    return this.descriptor;
  }
}
