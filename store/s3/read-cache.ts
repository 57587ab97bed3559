/**
 * The bounded local read cache of an S3 store, shared by every store
 * instance on the host: `<local>/cache/sha256/<2 hex>/<62 hex>.<16 hex of
 * ETag>`. A copy is a publisher's uploaded file, or made while a first read
 * goes front to back, renamed in only when it hashes to its digest. Named by
 * ETag, it serves only that very object; it is hashed on first read like any
 * blob, and dropped when it fails. Copies appear by rename and go by unlink,
 * so a reader that opened one keeps reading it. Least recently used go first.
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

/** `option`, else `$SLUICE_S3_CACHE_BYTES`, else 1 GiB; 0 turns it off. @throws EBADOPTION. */
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

  /** Renamed, not copied (hashed while written); false, `tmp` left, when it does not fit or place. */
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
    const paths: string[] = [];
    for (const sub of await this.io.readdir(this.dir).catch(() => [] as string[])) {
      for (const name of await this.io.readdir(join(this.dir, sub)).catch(() => [] as string[])) {
        paths.push(join(this.dir, sub, name));
      }
    }
    this.estimate = await evictToFit(this.io, paths, this.maxBytes);
  }
}

/**
 * Removes the least recently used (the later of access and modification
 * time) of the files at `paths` until they hold at most `maxBytes`; the
 * bytes left.
 */
export async function evictToFit(io: StoreIO, paths: readonly string[], maxBytes: number): Promise<number> {
  const files: Array<{ path: string; size: number; used: number }> = [];
  for (const path of paths) {
    const st = await io.stat(path).catch(() => undefined);
    if (st?.isFile()) files.push({ path, size: st.size, used: Math.max(st.atimeMs, st.mtimeMs) });
  }
  let total = files.reduce((n, f) => n + f.size, 0);
  files.sort((a, b) => a.used - b.used);
  for (const f of files) {
    if (total <= maxBytes) break;
    await io.unlink(f.path).then(
      () => (total -= f.size),
      () => {},
    );
  }
  return total;
}

/** A copy in the making from a handle's in-order blocks; anything else abandons it. */
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
