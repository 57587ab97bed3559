/** The store's filesystem calls in one replaceable object, so tests can inject faults and record durable order. */
import {
  constants,
  promises as fsp,
  link,
  lstat,
  readdir,
  rename,
  rmdir,
  type Stats,
  stat,
  unlink,
  utimes,
} from 'node:fs';
import { dirname } from 'node:path';
import { StoreFile } from './file.js';

export { StoreFile } from './file.js';

/** Filesystem operations the store performs. Every method may reject with a Node fs error. */
export interface StoreIO {
  /** Opens `path` with `flags` and `mode`. */
  open(path: string, flags: number, mode?: number): Promise<StoreFile>;
  /** At `position`, or (null) the current offset; may be short. */
  write(fh: StoreFile, buf: Uint8Array, off: number, len: number, position: number | null): Promise<number>;
  /** Writes `bufs` in order starting at `position`; resolves to bytes written (may be short). */
  writev(fh: StoreFile, bufs: Uint8Array[], position: number): Promise<number>;
  /** Cuts a file to `length` bytes. */
  truncate(fh: StoreFile, length: number): Promise<void>;
  /** Flushes a file's data and metadata to stable storage. */
  fsync(fh: StoreFile): Promise<void>;
  /** Flushes a file's data (and the metadata needed to read it back, such as its size) to stable storage. */
  datasync(fh: StoreFile): Promise<void>;
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
  /** The names in a directory (GC's listings). */
  readdir(dir: string): Promise<string[]>;
  /** stat(2): follows a symbolic link. */
  stat(path: string): Promise<Stats>;
  /** lstat(2): a symbolic link is reported as itself. */
  lstat(path: string): Promise<Stats>;
  /** Removes an empty directory. */
  rmdir(path: string): Promise<void>;
  /** Makes `newPath` a second name of `existing` (hard link). */
  link(existing: string, newPath: string): Promise<void>;
}

/** Adapts a Node callback to a promise (the callback API costs the main thread less than fs/promises). */
function settle(resolve: () => void, reject: (e: unknown) => void): (err: NodeJS.ErrnoException | null) => void {
  return (err) => (err ? reject(err) : resolve());
}

/** {@link settle} for a callback that also passes a value. */
function settleWith<T>(
  resolve: (v: T) => void,
  reject: (e: unknown) => void,
): (err: NodeJS.ErrnoException | null, value: T) => void {
  return (err, value) => (err ? reject(err) : resolve(value));
}

// Node's recursive mkdir says ENOENT when the last directory cannot be made (EROFS, EACCES), so the
// last step is tried alone to learn why.
export async function makeDirs(path: string): Promise<void> {
  try {
    await fsp.mkdir(path, { recursive: true, mode: 0o700 });
  } catch (err) {
    const parent = dirname(path);
    if ((err as { code?: unknown }).code !== 'ENOENT' || parent === path) throw err;
    // The parents first, one level at a time: the first that cannot be created throws its own error.
    await makeDirs(parent);
    try {
      await fsp.mkdir(path, { mode: 0o700 });
    } catch (again) {
      if ((again as { code?: unknown }).code !== 'EEXIST') throw again;
    }
  }
}

/** The real filesystem. */
export const realIO: StoreIO = {
  open: (path, flags, mode) => StoreFile.open(path, flags, mode),
  write: async (fh, buf, off, len, position) => (await fh.write(buf, off, len, position)).bytesWritten,
  writev: async (fh, bufs, position) => (await fh.writev(bufs, position)).bytesWritten,
  truncate: (fh, length) => fh.truncate(length),
  fsync: (fh) => fh.sync(),
  datasync: (fh) => fh.datasync(),
  fsyncDir: async (dir) => {
    const fh = await StoreFile.open(dir, constants.O_RDONLY);
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  },
  rename: (from, to) => new Promise((resolve, reject) => rename(from, to, settle(resolve, reject))),
  unlink: (path) => new Promise((resolve, reject) => unlink(path, settle(resolve, reject))),
  utimes: (path, atime, mtime) => new Promise((resolve, reject) => utimes(path, atime, mtime, settle(resolve, reject))),
  // Once per shard directory (the store remembers them): the promise API costs nothing that matters here.
  mkdir: makeDirs,
  readdir: (dir) => new Promise((resolve, reject) => readdir(dir, settleWith(resolve, reject))),
  stat: (path) => new Promise((resolve, reject) => stat(path, settleWith(resolve, reject))),
  lstat: (path) => new Promise((resolve, reject) => lstat(path, settleWith(resolve, reject))),
  rmdir: (path) => new Promise((resolve, reject) => rmdir(path, settle(resolve, reject))),
  link: (existing, newPath) => new Promise((resolve, reject) => link(existing, newPath, settle(resolve, reject))),
};

/** Retries short writes; null `position` is the current offset. No progress is EIO, not a loop. */
export async function writeAll(io: StoreIO, fh: StoreFile, buf: Uint8Array, position: number | null): Promise<void> {
  let off = 0;
  while (off < buf.length) {
    const n = await io.write(fh, buf, off, buf.length - off, position === null ? null : position + off);
    if (!(n > 0)) throw Object.assign(new Error('write made no progress'), { code: 'EIO', syscall: 'write' });
    off += n;
  }
}
