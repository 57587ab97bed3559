/**
 * The store's filesystem calls, in one replaceable object. Production uses
 * {@link realIO}; tests wrap it to inject ENOSPC, EIO, EACCES, short writes and
 * fsync failures, and to record the order of durable operations.
 */
import { constants, promises as fsp } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';

/** Filesystem operations the store performs. Every method may reject with a Node fs error. */
export interface StoreIO {
  /** Opens `path` with `flags` and `mode`. */
  open(path: string, flags: number, mode?: number): Promise<FileHandle>;
  /**
   * Writes `buf[off, off+len)` at `position`, or at the file's current offset
   * when `position` is null (the end, for a file opened with O_APPEND);
   * resolves to bytes written (may be short).
   */
  write(fh: FileHandle, buf: Uint8Array, off: number, len: number, position: number | null): Promise<number>;
  /** Writes `bufs` in order starting at `position`; resolves to bytes written (may be short). */
  writev(fh: FileHandle, bufs: Uint8Array[], position: number): Promise<number>;
  /** Flushes a file's data and metadata to stable storage. */
  fsync(fh: FileHandle): Promise<void>;
  /** Flushes a file's data (and the metadata needed to read it back, such as its size) to stable storage. */
  datasync(fh: FileHandle): Promise<void>;
  /** Flushes a directory entry to stable storage (after a rename into it). */
  fsyncDir(dir: string): Promise<void>;
  /** Atomically renames `from` onto `to`. */
  rename(from: string, to: string): Promise<void>;
  /** Removes a file. */
  unlink(path: string): Promise<void>;
  /** Sets access and modification times. */
  utimes(path: string, atime: Date, mtime: Date): Promise<void>;
  /** Creates a directory (and parents), mode 0700: only the store's owner may list or enter it. */
  mkdir(path: string): Promise<void>;
}

/** The real filesystem. */
export const realIO: StoreIO = {
  open: (path, flags, mode) => fsp.open(path, flags, mode),
  write: async (fh, buf, off, len, position) => (await fh.write(buf, off, len, position)).bytesWritten,
  writev: async (fh, bufs, position) => (await fh.writev(bufs, position)).bytesWritten,
  fsync: (fh) => fh.sync(),
  datasync: (fh) => fh.datasync(),
  fsyncDir: async (dir) => {
    const fh = await fsp.open(dir, constants.O_RDONLY);
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  },
  rename: (from, to) => fsp.rename(from, to),
  unlink: (path) => fsp.unlink(path),
  utimes: (path, atime, mtime) => fsp.utimes(path, atime, mtime),
  mkdir: async (path) => {
    await fsp.mkdir(path, { recursive: true, mode: 0o700 });
  },
};
