/**
 * The S3 backend of a store (store/backend.ts): blobs and line indexes as
 * objects under the store's prefix, one object per blob.
 *
 *     <prefix>/blobs/sha256/<2 hex>/<62 hex>       content, created once, never rewritten
 *     <prefix>/index/sha256/<2 hex>/<62 hex>.idx   line index of a blob of 1 MiB or more
 *
 * Requests per operation (docs/store.md, "S3"): publishing a new blob is 1
 * HEAD + 1 PUT (+ 1 PUT for its index when it is large; a multipart upload
 * is 2 + ceil(size / 16 MiB) PUTs); deduplicating is 1 HEAD, plus hashing
 * the object once per store (its GETs) unless this store verified or
 * published it; opening a blob
 * is 1 HEAD, then one GET per block read (store/s3/remote-file.ts); a
 * large blob's index is fetched once per host (1 HEAD + 1 GET per 4 MiB) and
 * kept in the local directory. Blobs read whole are copied to a bounded
 * local read cache (store/s3/read-cache.ts), from which later opens on the
 * host read with no GET.
 */
import { constants } from 'node:fs';
import { dirname } from 'node:path';
import { BadOptionError, NotFoundError, toSluiceError } from '../../engine/protocol/errors.js';
import type { BlobBackend } from '../backend.js';
import { READ_STORE_FILE, type StoreFile } from '../file.js';
import { makeDirs, type StoreIO, writeAll } from '../io.js';
import type { StoreLayout } from '../layout.js';
import type { S3Location } from '../location.js';
import { LeaseJournal, type LeaseTiming } from './lease.js';
import { type S3ConnectOptions, S3Objects } from './objects.js';
import { ReadCache, s3CacheBytes } from './read-cache.js';
import { RemoteFile } from './remote-file.js';
import { loadS3Sdk } from './sdk.js';
import { settle } from './tombstones.js';

/** A blob key after `blobs/sha256/`: `<2 hex>/<62 hex>`. */
const BLOB_KEY_REST = /^[0-9a-f]{2}\/[0-9a-f]{62}$/;

/** Bytes per GET when copying an index object to the local directory. */
const COPY_CHUNK = 4 * 1024 * 1024;

/** See the module comment. */
export class S3Blobs implements BlobBackend {
  readonly url: string;
  /** What every key of this store starts with: `''`, or the prefix and `/`. */
  readonly keyBase: string;
  private copies = 0;

  /** The local read cache, undefined when its bound is 0. */
  readonly cache: ReadCache | undefined;

  private constructor(
    /** The object layer (its `requests` count what this store cost). */
    readonly objects: S3Objects,
    location: S3Location,
    private readonly layout: StoreLayout,
    private readonly io: StoreIO,
    cacheBytes: number,
  ) {
    this.url = location.url;
    this.keyBase = location.prefix === '' ? '' : `${location.prefix}/`;
    this.cache = cacheBytes > 0 ? new ReadCache(layout.cache, layout.tmp, io, cacheBytes) : undefined;
  }

  /**
   * Loads the SDK (EMISSINGDEP without it), connects, and checks that the
   * bucket answers (ENOTFOUND when it does not exist, EDISK when it cannot
   * be reached or read).
   */
  static async open(
    location: S3Location,
    layout: StoreLayout,
    io: StoreIO,
    options: S3ConnectOptions & { cacheBytes?: number } = {},
  ): Promise<S3Blobs> {
    if (location.kind !== 's3') throw new BadOptionError(`not an S3 location: ${JSON.stringify(location)}`);
    const cacheBytes = s3CacheBytes(options.cacheBytes, options.env);
    const sdk = await loadS3Sdk();
    const objects = S3Objects.connect(sdk, location.bucket, options);
    const blobs = new S3Blobs(objects, location, layout, io, cacheBytes);
    try {
      await objects.checkBucket();
    } catch (err) {
      objects.destroy();
      throw err;
    }
    return blobs;
  }

  /** Key of blob `digest`. */
  blobKey(digest: string): string {
    return `${this.keyBase}blobs/sha256/${digest.slice(0, 2)}/${digest.slice(2)}`;
  }

  /** Key of the line index of blob `digest`. */
  indexKey(digest: string): string {
    return `${this.keyBase}index/sha256/${digest.slice(0, 2)}/${digest.slice(2)}.idx`;
  }

  async placeBlob(tmpPath: string, digest: string): Promise<StoreFile | undefined> {
    const size = (await this.io.stat(tmpPath)).size;
    const key = this.blobKey(digest);
    // The publisher checked that no intact copy is there: a create-once PUT that finds one is either
    // another host's good copy of the same bytes or a corrupt object. Overwriting heals the latter
    // and rewrites the former with equal bytes.
    const etag =
      (await this.objects.uploadFile(key, tmpPath, size)) ?? (await this.objects.uploadFile(key, tmpPath, size, true));
    const head = { size, etag: etag ?? '', lastModified: undefined };
    // Kept as the read cache's copy of the new object: the caller's descriptor of it is then the identity
    // it remembers as verified, the very file later opens on this host read.
    if (await this.cache?.keepPublished(tmpPath, digest, head)) return undefined;
    await this.io.unlink(tmpPath);
    return etag ? new RemoteFile(this.objects, key, head) : undefined;
  }

  async placeIndex(tmpPath: string, digest: string): Promise<void> {
    const size = (await this.io.stat(tmpPath)).size;
    await this.objects.uploadFile(this.indexKey(digest), tmpPath, size);
  }

  async openBlob(digest: string): Promise<StoreFile> {
    const key = this.blobKey(digest);
    const head = await this.objects.head(key);
    if (!head) throw new NotFoundError(`artifact ${digest} is not in the store at ${this.url}`, { digest });
    // A local copy of this very object (store/s3/read-cache.ts), else the object, copied as it is read whole.
    const cached = await this.cache?.open(digest, head);
    return cached ?? new RemoteFile(this.objects, key, head, this.cache?.tee(digest, head));
  }

  async dropCached(digest: string): Promise<boolean> {
    return (await this.cache?.drop(digest)) ?? false;
  }

  async openIndex(digest: string): Promise<StoreFile | undefined> {
    const local = this.layout.indexPath(digest);
    try {
      return await this.io.open(local, READ_STORE_FILE);
    } catch {
      // Not copied here yet (or unreadable): fetch it.
    }
    try {
      if (!(await this.copyIndex(digest, local))) return undefined;
      return await this.io.open(local, READ_STORE_FILE);
    } catch {
      // The index is a cache: without it the read scans.
      return undefined;
    }
  }

  /** Copies the index object of `digest` to `local` through a temporary file; false when there is none. */
  private async copyIndex(digest: string, local: string): Promise<boolean> {
    const key = this.indexKey(digest);
    const head = await this.objects.head(key);
    if (!head) return false;
    const tmp = `${this.layout.tmp}/${process.pid}-idxcopy${(this.copies++).toString(36)}.idx`;
    const fh = await this.io.open(tmp, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600);
    try {
      for (let at = 0; at < head.size; at += COPY_CHUNK) {
        const chunk = await this.objects.getRange(key, at, Math.min(head.size, at + COPY_CHUNK), head.etag);
        await writeAll(this.io, fh, chunk, at);
      }
      await fh.close();
      await makeDirs(dirname(local));
      await this.io.rename(tmp, local);
      return true;
    } catch (err) {
      await fh.close().catch(() => {});
      await this.io.unlink(tmp).catch(() => {});
      throw toSluiceError(err, 'EDISK');
    }
  }

  /** This store's pins: a lease object under `leases/` (store/s3/lease.ts). */
  leaseJournal(timing: LeaseTiming): LeaseJournal {
    return new LeaseJournal(this.objects, this.keyBase, timing);
  }

  /** Waits until no collection may delete blob `digest` (store/s3/tombstones.ts); the caller leased it first. */
  settle(digest: string): Promise<void> {
    return settle(this.objects, this.keyBase, digest);
  }

  /** Blobs under `<prefix>/blobs/sha256/` and their bytes: one ListObjectsV2 per 1000 (indexes are not counted). */
  async totals(): Promise<{ blobs: number; bytes: number }> {
    const prefix = `${this.keyBase}blobs/sha256/`;
    let blobs = 0;
    let bytes = 0;
    for await (const o of this.objects.list(prefix)) {
      if (!BLOB_KEY_REST.test(o.key.slice(prefix.length))) continue;
      blobs++;
      bytes += o.size;
    }
    return { blobs, bytes };
  }

  async hasBlob(digest: string): Promise<boolean> {
    return (await this.objects.head(this.blobKey(digest))) !== undefined;
  }

  close(): void {
    this.objects.destroy();
  }
}
