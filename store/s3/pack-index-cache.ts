/**
 * The per-host cache of S3 pack indexes: `<local>/cache/packs/<32 hex>`,
 * one file per pack object version, named by a hash of its key and ETag.
 * A pack object is created once and never rewritten (store/s3/packs.ts), so
 * the index of one version read once holds for as long as that version
 * exists: a fresh store instance on the host then finds a packed blob with
 * the LIST alone instead of a tail GET per pack. A file is the index bytes
 * as the pack holds them and a SHA-256 over key, ETag, size and those bytes,
 * checked on every load: a torn, damaged or foreign file is removed and the
 * index fetched again, never trusted. Entries stay hints as everywhere (a
 * read checks the record's header and hashes its content). Files appear by
 * rename; past the bound, the least recently used go first. Shared by every
 * store instance of the local directory.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { join } from 'node:path';
import { READ_STORE_FILE, type StoreFile } from '../file.js';
import { makeDirs, type StoreIO, writeAll } from '../io.js';
import { ownedName } from '../owners.js';
import { decodeIndex, encodeIndexEntry, PACK_INDEX_MAGIC, type PackEntry } from '../pack-format.js';
import { evictToFit } from './read-cache.js';

/** The bound when the read cache's allows it: an index is 48 bytes a blob, so ~700,000 packed blobs. */
export const PACK_INDEX_CACHE_BYTES = 32 * 1024 * 1024;
const CHECK_BYTES = 32;
/**
 * A file larger than this is not loaded (nor kept): ~21,000 entries, far
 * above a pack's 256 blobs, so a stray big file is never read into memory.
 */
const MAX_FILE_BYTES = 1024 * 1024;

/** A pack object version as a listing shows it. */
export interface PackVersion {
  readonly key: string;
  readonly etag: string;
  readonly size: number;
}

/** See the module comment. */
export class PackIndexCache {
  /** Bytes this instance believes the cache holds; undefined until it listed the cache. */
  private estimate: number | undefined;
  private evicting: Promise<void> | undefined;
  /** Loads that found a valid file, and files found damaged (removed). */
  readonly stats = { hits: 0, damaged: 0 };

  constructor(
    /** `<local>/cache/packs`. */
    private readonly dir: string,
    /** Where files are written before they are renamed in (the store's tmp/). */
    private readonly tmpDir: string,
    private readonly io: StoreIO,
    /** The bound in bytes (more than 0). */
    readonly maxBytes: number,
  ) {}

  /** Where the index of `pack` is kept. */
  pathOf(pack: PackVersion): string {
    return join(this.dir, createHash('sha256').update(`${pack.key}\0${pack.etag}`).digest('hex').slice(0, 32));
  }

  /** The entries of `pack` kept here, or undefined (none, or a file that fails its check, which is removed). */
  async get(pack: PackVersion): Promise<PackEntry[] | undefined> {
    if (pack.etag === '') return undefined;
    const path = this.pathOf(pack);
    const file = await readSmall(this.io, path, Math.min(this.maxBytes, MAX_FILE_BYTES));
    if (file === undefined) return undefined;
    const body = file.subarray(0, Math.max(0, file.length - CHECK_BYTES));
    const entries =
      file.length > CHECK_BYTES && check(pack, body).equals(file.subarray(body.length))
        ? decodeIndex(body, pack.size)
        : undefined;
    if (entries === undefined) {
      this.stats.damaged++;
      await this.io.unlink(path).catch(() => {});
      return undefined;
    }
    this.stats.hits++;
    // Touched, so eviction takes the least recently used first.
    const now = new Date();
    await this.io.utimes(path, now, now).catch(() => {});
    return entries;
  }

  /** Keeps the entries of `pack`. Never throws: this is only a cache. */
  async put(pack: PackVersion, entries: readonly PackEntry[]): Promise<void> {
    // No ETag, no version to name the file by.
    if (pack.etag === '') return;
    const body = Buffer.concat([PACK_INDEX_MAGIC, ...entries.map(encodeIndexEntry)]);
    const bytes = Buffer.concat([body, check(pack, body)]);
    if (bytes.length > Math.min(this.maxBytes, MAX_FILE_BYTES)) return;
    const tmp = join(this.tmpDir, `${ownedName()}.packidx`);
    try {
      const fh = await this.io.open(tmp, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600);
      try {
        await writeAll(this.io, fh, bytes, 0);
      } finally {
        await fh.close();
      }
      await makeDirs(this.dir);
      await this.io.rename(tmp, this.pathOf(pack));
    } catch {
      await this.io.unlink(tmp).catch(() => {});
      return;
    }
    if (this.estimate !== undefined) this.estimate += bytes.length;
    if (this.estimate === undefined || this.estimate > this.maxBytes) {
      this.evicting ??= this.evict().finally(() => {
        this.evicting = undefined;
      });
      await this.evicting.catch(() => {});
    }
  }

  private async evict(): Promise<void> {
    const names = await this.io.readdir(this.dir).catch(() => [] as string[]);
    this.estimate = await evictToFit(
      this.io,
      names.map((n) => join(this.dir, n)),
      this.maxBytes,
    );
  }
}

/** The check of `body` as the index of `pack`: a file for another key, version or size fails it. */
function check(pack: PackVersion, body: Buffer): Buffer {
  return createHash('sha256').update(`${pack.key}\0${pack.etag}\0${pack.size}\0`).update(body).digest();
}

/** The whole file at `path` when it is a regular file of at most `max` bytes; undefined otherwise. */
async function readSmall(io: StoreIO, path: string, max: number): Promise<Buffer | undefined> {
  let fh: StoreFile;
  try {
    fh = await io.open(path, READ_STORE_FILE);
  } catch {
    return undefined;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile() || st.size > max) return undefined;
    const buf = Buffer.alloc(st.size);
    let at = 0;
    while (at < buf.length) {
      const { bytesRead } = await fh.read(buf, at, buf.length - at, at);
      if (bytesRead === 0) break;
      at += bytesRead;
    }
    return buf.subarray(0, at);
  } catch {
    return undefined;
  } finally {
    await fh.close().catch(() => {});
  }
}
