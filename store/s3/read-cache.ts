/**
 * The bounded local read cache of an S3 store: copies of blobs read from
 * the bucket, in the local directory, so a second store instance on the
 * host (another worker thread, another process) reads a blob from disk
 * instead of downloading it again.
 *
 *     <local>/cache/sha256/<2 hex>/<62 hex>.<16 hex of the object's ETag>
 *
 * A publisher keeps the file it uploaded as the copy of the new object. A
 * copy is also made while a store reads the whole object front to back (its
 * verifying first read, store/integrity.ts): each block the handle fetches
 * is also written to a temporary file and hashed, and the file is renamed
 * into the cache only when it holds exactly the object and hashes to its
 * digest. A copy is named by the ETag of the object it came from, so it
 * serves only that very object: a replaced (healed, corrupted, re-created)
 * object is read from the bucket again. A copy is a blob like any other to
 * the reader, hashed on its first read by each store instance; one that
 * fails is removed and the object read from the bucket
 * ({@link ReadCache.drop}, called by the integrity check).
 *
 * The bound: after a copy is added and this instance's estimate of the
 * total passes it, the cache is listed and the least recently used copies
 * (by the later of access and modification time) are removed until it fits.
 * Several processes may share the directory: copies appear by rename and
 * disappear by unlink, so a reader that opened one keeps reading it.
 */
import { createHash, type Hash } from 'node:crypto';
import { constants } from 'node:fs';
import { dirname, join } from 'node:path';
import { BadOptionError } from '../../engine/protocol/errors.js';
import { READ_STORE_FILE, type StoreFile } from '../file.js';
import { makeDirs, type StoreIO, writeAll } from '../io.js';
import { ownedName } from '../owners.js';
import type { ObjectHead } from './objects.js';

/** Default bound of the cache: 1 GiB. */
const DEFAULT_S3_CACHE_BYTES = 1024 * 1024 * 1024;

/**
 * The cache bound: `option`, else `$SLUICE_S3_CACHE_BYTES`, else
 * {@link DEFAULT_S3_CACHE_BYTES}; 0 turns the cache off.
 *
 * @throws BadOptionError (EBADOPTION) for a value that is not a non-negative integer.
 */
export function s3CacheBytes(option?: number, env: NodeJS.ProcessEnv = process.env): number {
  const v =
    option ??
    (env.SLUICE_S3_CACHE_BYTES === undefined || env.SLUICE_S3_CACHE_BYTES === ''
      ? undefined
      : Number(env.SLUICE_S3_CACHE_BYTES));
  if (v === undefined) return DEFAULT_S3_CACHE_BYTES;
  if (!Number.isSafeInteger(v) || v < 0) {
    throw new BadOptionError(
      `the S3 read cache bound (s3CacheBytes or SLUICE_S3_CACHE_BYTES) must be a non-negative integer, got ${JSON.stringify(option ?? env.SLUICE_S3_CACHE_BYTES)}`,
    );
  }
  return v;
}

/** See the module comment. */
export class ReadCache {
  /** Bytes this instance believes the cache holds; undefined until it listed the cache. */
  private estimate: number | undefined;
  private evicting: Promise<void> | undefined;

  constructor(
    /** `<local>/cache/sha256`. */
    private readonly dir: string,
    /** Where copies are written before they are complete (the store's tmp/). */
    private readonly tmpDir: string,
    private readonly io: StoreIO,
    /** The bound in bytes (more than 0). */
    readonly maxBytes: number,
  ) {}

  /** Where the copy of blob `digest` from the object version `etag` lives. */
  pathOf(digest: string, etag: string): string {
    const tag = createHash('sha256').update(etag).digest('hex').slice(0, 16);
    return join(this.dir, digest.slice(0, 2), `${digest.slice(2)}.${tag}`);
  }

  /** The copy of `digest` made from the object `head` describes, opened, or undefined when there is none. */
  async open(digest: string, head: ObjectHead): Promise<StoreFile | undefined> {
    let fh: StoreFile;
    try {
      fh = await this.io.open(this.pathOf(digest, head.etag), READ_STORE_FILE);
    } catch {
      return undefined;
    }
    try {
      const st = await fh.stat();
      if (st.isFile() && st.size === head.size) return fh;
    } catch {
      // Unreadable: read the object instead.
    }
    await fh.close().catch(() => {});
    return undefined;
  }

  /** A writer of a copy of the object `head` describes, or undefined when it would not fit. */
  tee(digest: string, head: ObjectHead): CacheTee | undefined {
    return head.size <= this.maxBytes ? new CacheTee(this, digest, head) : undefined;
  }

  /**
   * Takes the file `tmp` a publisher just uploaded as the object `head`
   * describes (hashed while it was written, so it is blob `digest`) as the
   * copy of that object: renamed, not copied. False (and `tmp` left where it
   * is) when it does not fit or cannot be placed.
   */
  async keepPublished(tmp: string, digest: string, head: ObjectHead): Promise<boolean> {
    if (head.size > this.maxBytes || head.etag === '') return false;
    try {
      await this.admit(tmp, digest, head);
      return true;
    } catch {
      return false;
    }
  }

  /** Removes every copy of `digest`; true when there was one (its reader should read the object instead). */
  async drop(digest: string): Promise<boolean> {
    const sub = join(this.dir, digest.slice(0, 2));
    let dropped = false;
    for (const name of await this.io.readdir(sub).catch(() => [] as string[])) {
      if (!name.startsWith(`${digest.slice(2)}.`)) continue;
      await this.io.unlink(join(sub, name)).then(
        () => (dropped = true),
        () => {},
      );
    }
    return dropped;
  }

  /** @internal A temporary file for a copy. */
  tmpPath(): string {
    return join(this.tmpDir, `${ownedName()}.cache`);
  }

  /** @internal */
  get fileIO(): StoreIO {
    return this.io;
  }

  /** @internal Places the finished copy `tmp` and keeps the cache within its bound. */
  async admit(tmp: string, digest: string, head: ObjectHead): Promise<void> {
    const path = this.pathOf(digest, head.etag);
    await makeDirs(dirname(path));
    await this.io.rename(tmp, path);
    if (this.estimate !== undefined) this.estimate += head.size;
    if (this.estimate === undefined || this.estimate > this.maxBytes) {
      this.evicting ??= this.evict().finally(() => {
        this.evicting = undefined;
      });
      await this.evicting;
    }
  }

  /** Lists the cache and removes the least recently used copies until it fits. */
  private async evict(): Promise<void> {
    const files: Array<{ path: string; size: number; used: number }> = [];
    for (const sub of await this.io.readdir(this.dir).catch(() => [] as string[])) {
      for (const name of await this.io.readdir(join(this.dir, sub)).catch(() => [] as string[])) {
        const path = join(this.dir, sub, name);
        const st = await this.io.stat(path).catch(() => undefined);
        if (st?.isFile()) files.push({ path, size: st.size, used: Math.max(st.atimeMs, st.mtimeMs) });
      }
    }
    let total = files.reduce((n, f) => n + f.size, 0);
    files.sort((a, b) => a.used - b.used);
    for (const f of files) {
      if (total <= this.maxBytes) break;
      await this.io.unlink(f.path).then(
        () => (total -= f.size),
        () => {},
      );
    }
    this.estimate = total;
  }
}

/**
 * One copy in the making: the blocks a remote handle fetches, in order from
 * the start, are appended and hashed; anything else (a read elsewhere, a
 * failure, a content that does not hash to its digest) abandons the copy.
 */
export class CacheTee {
  private fh: StoreFile | undefined;
  private tmp: string | undefined;
  private next = 0;
  private readonly hash: Hash = createHash('sha256');
  private done = false;

  constructor(
    private readonly cache: ReadCache,
    private readonly digest: string,
    private readonly head: ObjectHead,
  ) {}

  /** Takes the block `data` the handle fetched at `position`. Never throws: the copy is only a cache. */
  async take(position: number, data: Buffer): Promise<void> {
    if (this.done) return;
    // Past the next byte in order: this handle is not reading the object front to back.
    if (position > this.next) return this.abandon();
    // Only what is new (a block may go over bytes already taken).
    if (position < this.next) data = data.subarray(Math.min(data.length, this.next - position));
    if (data.length === 0) return;
    try {
      const io = this.cache.fileIO;
      if (!this.fh) {
        this.tmp = this.cache.tmpPath();
        this.fh = await io.open(this.tmp, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600);
      }
      await writeAll(io, this.fh, data, this.next);
      this.hash.update(data);
      this.next += data.length;
      if (this.next >= this.head.size) await this.finish();
    } catch {
      await this.abandon();
    }
  }

  /** Places the copy when it is whole and hashes to its digest. */
  private async finish(): Promise<void> {
    this.done = true;
    const fh = this.fh;
    const tmp = this.tmp as string;
    this.fh = undefined;
    try {
      await fh?.close();
      if (this.next !== this.head.size || this.hash.digest('hex') !== this.digest) {
        await this.cache.fileIO.unlink(tmp).catch(() => {});
        return;
      }
      await this.cache.admit(tmp, this.digest, this.head);
    } catch {
      await this.cache.fileIO.unlink(tmp).catch(() => {});
    }
    this.tmp = undefined;
  }

  /** Gives the copy up, removing its temporary file (idempotent). */
  async abandon(): Promise<void> {
    this.done = true;
    const fh = this.fh;
    const tmp = this.tmp;
    this.fh = undefined;
    this.tmp = undefined;
    await fh?.close().catch(() => {});
    if (tmp) await this.cache.fileIO.unlink(tmp).catch(() => {});
  }
}
