/**
 * The S3 backend (store/backend.ts), one object per blob above the pack
 * threshold, small blobs in pack objects (store/s3/packs.ts):
 *
 *     <prefix>/blobs/sha256/<2 hex>/<62 hex>       content, created once, never rewritten
 *     <prefix>/index/sha256/<2 hex>/<62 hex>.idx   line index of a blob of 1 MiB or more
 *     <prefix>/packs/<owner>-<seq>.pack            a batch of small blobs, created once
 *
 * Pins are a lease (store/s3/lease.ts); collection and audit span every host
 * on the bucket. Request costs: docs/store.md, "What a call costs in requests".
 */
import { constants } from 'node:fs';
import { dirname } from 'node:path';
import { IntegrityError, NotFoundError, toSluiceError } from '../../engine/protocol/errors.js';
import type { BackendConnection, ObjectPacks, S3Bucket, StoreBackend } from '../backend.js';
import { assertDigest, type BlobHandle, fileHandle } from '../blob-handle.js';
import { crashPoint } from '../crash-point.js';
import { READ_STORE_FILE, type StoreFile } from '../file.js';
import type { CollectHooks, GcOptions, GcReport } from '../gc/collect.js';
import { refreshIntact } from '../integrity.js';
import { makeDirs, writeAll } from '../io.js';
import type { S3Location } from '../location.js';
import type { Pin } from '../pins.js';
import type { Store, StoreOptions } from '../store.js';
import type { VerifyOptions, VerifyReport } from '../verify.js';
import { LeaseJournal, type LeaseTiming, leaseTiming } from './lease.js';
import { type ObjectHead, S3Objects } from './objects.js';
import { PACK_INDEX_CACHE_BYTES, PackIndexCache } from './pack-index-cache.js';
import { packedKey, type S3PackLocation, S3Packs } from './packs.js';
import { ReadCache, s3CacheBytes } from './read-cache.js';
import { RemoteFile } from './remote-file.js';
import { loadS3Sdk } from './sdk.js';
import { settle } from './tombstones.js';

/** A blob key after `blobs/sha256/`: `<2 hex>/<62 hex>`. */
const BLOB_KEY_REST = /^[0-9a-f]{2}\/[0-9a-f]{62}$/;

/** Bytes per GET when copying an index object to the local directory. */
const COPY_CHUNK = 4 * 1024 * 1024;

/** @throws EBADOPTION for lease or cache options; EMISSINGDEP without the SDK; ENOTFOUND or EDISK for the bucket. */
export async function connectS3(
  location: S3Location,
  options: StoreOptions,
  packMaxBlobBytes: number,
): Promise<BackendConnection> {
  const timing = leaseTiming(options.lease);
  const cacheBytes = s3CacheBytes(options.s3CacheBytes);
  const sdk = await loadS3Sdk();
  const objects = S3Objects.connect(sdk, location.bucket, {
    ...(options.s3ClientConfig ? { clientConfig: options.s3ClientConfig } : {}),
  });
  try {
    await objects.checkBucket();
  } catch (err) {
    objects.destroy();
    throw err;
  }
  return {
    bind: (store) => new S3Backend(store, objects, location, timing, cacheBytes, packMaxBlobBytes),
    discard: () => objects.destroy(),
  };
}

/** See the module comment. */
export class S3Backend implements StoreBackend {
  readonly pins: LeaseJournal;
  readonly placesLocally = false;
  readonly totalsBy = 'listing';
  readonly packs = undefined;
  readonly objectPacks: ObjectPacks;
  /** The pack objects of small blobs. */
  readonly packObjects: S3Packs;
  readonly reserve = undefined;
  readonly bucket: S3Bucket;
  /** How the store is written in messages and by `--store` (`s3://bucket/prefix`). */
  readonly url: string;
  /** What every key of this store starts with: `''`, or the prefix and `/`. */
  readonly keyBase: string;
  /** The local read cache, undefined when its bound is 0. */
  readonly cache: ReadCache | undefined;
  private readonly store: Store;
  private copies = 0;

  /** The backend of `store`, on the bucket `objects` reaches. */
  constructor(
    store: Store,
    /** The object layer (its `requests` count what this store cost). */
    readonly objects: S3Objects,
    location: S3Location,
    timing: LeaseTiming,
    cacheBytes: number,
    packMaxBlobBytes = 0,
  ) {
    this.store = store;
    this.url = location.url;
    this.keyBase = location.prefix === '' ? '' : `${location.prefix}/`;
    this.bucket = { objects, keyBase: this.keyBase };
    this.pins = new LeaseJournal(objects, this.keyBase, timing);
    const { layout, io } = store;
    const indexCache =
      cacheBytes > 0
        ? new PackIndexCache(layout.packIndexes, layout.tmp, io, Math.min(cacheBytes, PACK_INDEX_CACHE_BYTES))
        : undefined;
    this.packObjects = new S3Packs(objects, this.keyBase, this.pins, packMaxBlobBytes, indexCache);
    this.objectPacks = {
      maxBlobBytes: packMaxBlobBytes,
      publish: (digest, content, lines, pin, deferred) => this.publishPacked(digest, content, lines, pin, deferred),
    };
    this.cache = cacheBytes > 0 ? new ReadCache(layout.cache, layout.tmp, io, cacheBytes) : undefined;
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
    const io = this.store.io;
    const size = (await io.stat(tmpPath)).size;
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
    await io.unlink(tmpPath);
    return etag ? new RemoteFile(this.objects, key, head) : undefined;
  }

  /** Uploads the index, then keeps the file as this host's copy. */
  async placeIndex(tmpPath: string, digest: string): Promise<void> {
    const size = (await this.store.io.stat(tmpPath)).size;
    await this.objects.uploadFile(this.indexKey(digest), tmpPath, size);
    await this.store.placement.moveIntoPlace(tmpPath, this.store.layout.indexPath(digest));
  }

  /** Hashed while packed: remembered as verified once stored, so this instance reads it with no hash. */
  private async publishPacked(
    digest: string,
    content: Uint8Array,
    lines: number,
    pin: Pin | undefined,
    deferred: boolean,
  ): Promise<void> {
    const appended = this.packObjects.append(digest, content, pin, deferred);
    const stored = appended.stored.then((loc) => {
      crashPoint('blob-renamed');
      this.store.verified.remember(digest, { key: packedKey(loc), lines });
    });
    // A deferred upload's failure reaches the caller through the pin's vouch.
    stored.catch(() => {});
    if (!appended.deferred) await stored;
  }

  /** A packed copy this instance knows of, else the object, else a packed copy found in the packs added since. */
  async openBlob(digest: string): Promise<BlobHandle> {
    const packs = this.packObjects;
    const known = packs.knownLocation(digest);
    if (known) {
      const h = await this.openPackedAt(digest, known);
      if (h) return h;
      packs.forget(digest, known);
    }
    try {
      return fileHandle((await this.openObject(digest)).file);
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'ENOTFOUND') throw err;
      const h = await this.openPacked(digest);
      if (h) return h;
      throw err;
    }
  }

  /** Looks through the packs (listed again on a miss, once more after a stale location). */
  private async openPacked(digest: string): Promise<BlobHandle | undefined> {
    const packs = this.packObjects;
    for (let attempt = 0; attempt < 2; attempt++) {
      const loc = await packs.locate(digest);
      if (!loc) return undefined;
      const h = await this.openPackedAt(digest, loc);
      if (h) return h;
      packs.forget(digest, loc);
    }
    return undefined;
  }

  /** A damaged record is EINTEGRITY only when no other packed copy is found (one published since heals the read). */
  private async openPackedAt(digest: string, loc: S3PackLocation): Promise<BlobHandle | undefined> {
    const packs = this.packObjects;
    try {
      return await packs.open(digest, loc);
    } catch (err) {
      if (!(err instanceof IntegrityError) || !(await packs.another(digest, loc))) throw err;
      const next = packs.knownLocation(digest);
      if (!next) throw err;
      return packs.open(digest, next);
    }
  }

  async openBlobFile(digest: string): Promise<BlobHandle> {
    assertDigest(digest);
    return fileHandle((await this.openObject(digest)).file);
  }

  /** The version its HEAD finds: a cached copy of that object, else the object (cached as read whole). */
  async openObject(digest: string): Promise<{ file: StoreFile; head: ObjectHead }> {
    const key = this.blobKey(digest);
    const head = await this.objects.head(key);
    if (!head) throw new NotFoundError(`artifact ${digest} is not in the store at ${this.url}`, { digest });
    const cached = await this.cache?.open(digest, head);
    return { file: cached ?? new RemoteFile(this.objects, key, head, this.cache?.tee(digest, head)), head };
  }

  /** The read-cache copy, else the packed copy last opened (when there is another copy to read instead). */
  async dropCached(digest: string): Promise<boolean> {
    if (await this.cache?.drop(digest)) return true;
    const known = this.packObjects.knownLocation(digest);
    return known !== undefined && (await this.packObjects.another(digest, known));
  }

  async openIndex(digest: string): Promise<StoreFile | undefined> {
    const local = this.store.layout.indexPath(digest);
    try {
      return await this.store.io.open(local, READ_STORE_FILE);
    } catch {
      // Not copied here yet (or unreadable): fetch it.
    }
    try {
      if (!(await this.copyIndex(digest, local))) return undefined;
      return await this.store.io.open(local, READ_STORE_FILE);
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
    const io = this.store.io;
    const tmp = `${this.store.layout.tmp}/${process.pid}-idxcopy${(this.copies++).toString(36)}.idx`;
    const fh = await io.open(tmp, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600);
    try {
      for (let at = 0; at < head.size; at += COPY_CHUNK) {
        const chunk = await this.objects.getRange(key, at, Math.min(head.size, at + COPY_CHUNK), head.etag);
        await writeAll(io, fh, chunk, at);
      }
      await fh.close();
      await makeDirs(dirname(local));
      await io.rename(tmp, local);
      return true;
    } catch (err) {
      await fh.close().catch(() => {});
      await io.unlink(tmp).catch(() => {});
      throw toSluiceError(err, 'EDISK');
    }
  }

  /** Waits until no collection may delete blob `digest` (store/s3/tombstones.ts); the caller leased it first. */
  settle(digest: string): Promise<void> {
    return settle(this.objects, this.keyBase, digest);
  }

  /** An object is immutable once created: the same intact-content check as a file, and nothing to refresh. */
  refreshBlob(digest: string, bytes: number): Promise<boolean> {
    this.store.assertOpen();
    return refreshIntact(this.store, digest, bytes, async () => true);
  }

  /**
   * Blobs under `<prefix>/blobs/sha256/` and their bytes, then the packed ones: one ListObjectsV2
   * per 1000 objects, and a GET of the index of each pack this instance has not read (indexes are not counted).
   */
  async totals(): Promise<{ blobs: number; bytes: number }> {
    const prefix = `${this.keyBase}blobs/sha256/`;
    let blobs = 0;
    let bytes = 0;
    for await (const o of this.objects.list(prefix)) {
      if (!BLOB_KEY_REST.test(o.key.slice(prefix.length))) continue;
      blobs++;
      bytes += o.size;
    }
    await this.packObjects.refresh();
    const packed = this.packObjects.totals();
    return { blobs: blobs + packed.blobs, bytes: bytes + packed.bytes };
  }

  /** A packed copy counts once its record header names it. */
  async hasBlob(digest: string): Promise<boolean> {
    if ((await this.objects.head(this.blobKey(digest))) !== undefined) return true;
    return (await this.openPacked(digest).catch(() => undefined)) !== undefined;
  }

  async collect(hooks: CollectHooks, options?: GcOptions): Promise<GcReport> {
    const { collectS3Store } = await import('./collect.js');
    return collectS3Store(this.store, this, hooks, options);
  }

  async verify(options?: VerifyOptions): Promise<VerifyReport> {
    const { verifyS3Store } = await import('./verify.js');
    return verifyS3Store(this.store, this, options);
  }

  /** Uploads pending packed publishes, deletes the lease (through this backend's client), then releases the connections. */
  async close(): Promise<void> {
    await this.packObjects.close().catch(() => {});
    await this.pins.close();
    this.objects.destroy();
  }
}
