/**
 * Small blobs of an S3 store in pack objects (docs/store.md, "Packs on S3"):
 *
 *     <prefix>/packs/<owner>-<12-digit seq>.pack    one batch of publishes, created once, never rewritten
 *
 * Publishes are group-committed: what arrives while one PUT is in flight
 * goes into the next object, and a publish resolves once its object is
 * stored. A publish under a pin that asked for it waits for the pin's vouch
 * instead (a call's streams and manifest then go up in one PUT). Before an
 * object is uploaded the store's lease must cover its sequence number
 * (store/s3/lease.ts, {@link LeaseJournal.coverPack}): a collection that
 * lists the pack reads a lease pinning it. Another host finds a packed blob
 * by listing `packs/` and reading the index at the tail of each object new
 * to it; a read is one ranged GET of the record.
 */
import { DiskError, IntegrityError, toSluiceError } from '../../engine/protocol/errors.js';
import type { BlobHandle } from '../blob-handle.js';
import { crashPoint } from '../crash-point.js';
import { ownedName } from '../owners.js';
import { decodeRecordHeader, type PackEntry, RECORD_HEADER_BYTES } from '../pack-format.js';
import { PackLocations } from '../pack-locations.js';
import type { Pin } from '../pins.js';
import type { LeaseJournal } from './lease.js';
import type { ListedObject, S3Objects } from './objects.js';
import type { PackIndexCache } from './pack-index-cache.js';
import { decodePackFooter, decodePackIndex, encodePackObject, PACK_FOOTER_BYTES } from './pack-object.js';

/** At most this many blobs in one pack object. */
const MAX_BATCH_BLOBS = 256;
/** A batch is cut once it holds this many content bytes. */
const MAX_BATCH_BYTES = 8 * 1024 * 1024;
/** A pack object up to this size is read whole to find its index (one GET). */
const READ_WHOLE_BYTES = 64 * 1024;

/** Pack keys after `packs/`: the owner, a dash, 12 decimal digits. */
export const PACK_KEY_REST = /^([0-9a-z-]+)-([0-9]{12})\.pack$/;

/** Where a packed blob is. */
export interface S3PackLocation {
  readonly key: string;
  /** The ETag of the pack object (every read is conditional on it). */
  readonly etag: string;
  readonly offset: number;
  readonly length: number;
}

/** A pack object as a listing and its index show it (GC and verify). */
export interface ListedPack {
  readonly key: string;
  readonly owner: string;
  readonly seq: number;
  readonly size: number;
  readonly etag: string;
  readonly lastModified: Date | undefined;
  readonly entries: PackEntry[];
  /** False when its footer or index is unreadable: what it holds is unknown, so it is never deleted. */
  readonly indexed: boolean;
  /** Why its index could not be read (`CODE: message`), when `indexed` is false. */
  readonly unreadable?: string;
}

interface Pending {
  digest: string;
  content: Uint8Array;
  pin: Pin | undefined;
  resolve: (loc: S3PackLocation) => void;
  reject: (err: unknown) => void;
}

/** Counters of the group commit (tests and benchmarks read them). */
export interface S3PackStats {
  blobs: number;
  /** Pack objects uploaded (one PUT each). */
  packs: number;
  /** Pack objects of other writers whose index was read from the bucket. */
  indexesRead: number;
  /** Pack indexes found in the host's cache instead (no request). */
  indexesCached: number;
}

/** The packs of one S3 store instance (see the module comment). */
export class S3Packs extends PackLocations<S3PackLocation> {
  readonly stats: S3PackStats = { blobs: 0, packs: 0, indexesRead: 0, indexesCached: 0 };
  /** The owner part of this instance's pack keys. */
  readonly owner = ownedName(16);
  private seq = 0;
  private pending: Pending[] = [];
  private flushing: Promise<void> | undefined;
  private closed = false;
  /** Pack keys whose entries are in {@link where}, with the ETag read. */
  private readonly known = new Map<string, string>();
  /** `<key>:<offset>` of packed copies that failed their hash. */
  private readonly distrusted = new Set<string>();

  constructor(
    private readonly objects: S3Objects,
    private readonly keyBase: string,
    private readonly lease: LeaseJournal,
    /** Blobs of at most this many bytes are packed (0: none). */
    readonly maxBlobBytes: number,
    /** The host's cache of pack indexes, if any (store/s3/pack-index-cache.ts). */
    private readonly indexCache?: PackIndexCache,
  ) {
    super();
    lease.usePacks(this.owner, () => this.seq);
  }

  /** Key prefix of every pack of the store. */
  get prefix(): string {
    return `${this.keyBase}packs/`;
  }

  /** Key of this instance's pack `seq`. */
  private keyOf(seq: number): string {
    return `${this.prefix}${this.owner}-${String(seq).padStart(12, '0')}.pack`;
  }

  /**
   * Appends `digest` to the next pack object; resolves once it is stored.
   * With `deferred` and a pin of this store's lease, the upload waits for
   * that pin's vouch (or release, or another publish's batch); the result
   * says whether it does (else the caller awaits `stored` itself).
   */
  append(
    digest: string,
    content: Uint8Array,
    pin: Pin | undefined,
    deferred = false,
  ): { stored: Promise<S3PackLocation>; deferred: boolean } {
    if (this.closed) {
      return { stored: Promise.reject(toSluiceError(new Error('the store is closed'), 'ECLOSED')), deferred: false };
    }
    let resolve!: (loc: S3PackLocation) => void;
    let reject!: (err: unknown) => void;
    const done = new Promise<S3PackLocation>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    this.pending.push({ digest, content, pin, resolve, reject });
    // Only with something pending: a flush of nothing would end before it is assigned, and stay assigned.
    const kick = () => {
      if (!this.flushing && this.pending.length > 0) this.flushing = this.flush();
    };
    done.catch(() => {});
    // Refused (a released pin, or another store's): no vouch will wait for the upload, so the caller must.
    const waits = deferred && pin !== undefined && this.lease.defer(pin, kick, done);
    if (!waits) kick();
    return { stored: done, deferred: waits };
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      let bytes = 0;
      let n = 0;
      while (n < this.pending.length && n < MAX_BATCH_BLOBS && (n === 0 || bytes < MAX_BATCH_BYTES)) {
        bytes += (this.pending[n] as Pending).content.length;
        n++;
      }
      const batch = this.pending.splice(0, n);
      const seq = this.seq++;
      const key = this.keyOf(seq);
      this.lease.holdPack(seq);
      try {
        for (const p of batch) if (p.pin) this.lease.holdPacked(p.pin, p.digest, seq);
        const { body, entries } = encodePackObject(batch);
        crashPoint('pack-written');
        // An unpinned publish is promised nothing against a collection but its grace period.
        if (batch.some((p) => p.pin)) await this.lease.coverPack(seq);
        const etag = await this.objects.putIfAbsent(key, body);
        // The key is this instance's own: taken means another writer reused an owner name.
        if (etag === undefined) throw new DiskError(`S3 pack ${key} already exists`, { key, s3: 'PackTaken' });
        crashPoint('pack-synced');
        this.stats.packs++;
        this.stats.blobs += batch.length;
        this.known.set(key, etag);
        for (const [i, p] of batch.entries()) {
          const e = entries[i] as PackEntry;
          const loc = { key, etag, offset: e.offset, length: e.length };
          this.where.set(e.digest, loc);
          p.resolve(loc);
        }
      } catch (err) {
        const e = toSluiceError(err, 'EDISK');
        for (const p of batch) p.reject(e);
      } finally {
        this.lease.unholdPack(seq);
      }
    }
    this.flushing = undefined;
  }

  /** The location memory holds for `digest` (no request). */
  knownLocation(digest: string): S3PackLocation | undefined {
    return this.where.get(digest);
  }

  /** Reads the index of every pack not known yet (1 LIST per 1000 packs + 1 GET per new pack). */
  protected async refreshOnce(): Promise<void> {
    const present = new Set<string>();
    for await (const o of this.objects.list(this.prefix)) {
      if (!PACK_KEY_REST.test(o.key.slice(this.prefix.length))) continue;
      present.add(o.key);
      if (this.known.get(o.key) === o.etag) continue;
      const entries = await this.readEntries(o).catch(() => undefined);
      if (entries) this.remember(o, entries);
    }
    for (const key of [...this.known.keys()]) if (!present.has(key)) this.forgetPack(key);
  }

  /**
   * The entries of pack object `o`, from the host's cache of indexes, else
   * from its footer and index (then kept in the cache); undefined without a
   * valid footer. `fresh` skips the cache (an audit reads what the bucket holds).
   */
  async readEntries(o: Pick<ListedObject, 'key' | 'size' | 'etag'>, fresh = false): Promise<PackEntry[] | undefined> {
    if (o.size < PACK_FOOTER_BYTES) return undefined;
    const cached = fresh ? undefined : await this.indexCache?.get(o);
    if (cached) {
      this.stats.indexesCached++;
      return cached;
    }
    const entries = await this.fetchEntries(o);
    if (entries) await this.indexCache?.put(o, entries);
    return entries;
  }

  private async fetchEntries(o: Pick<ListedObject, 'key' | 'size' | 'etag'>): Promise<PackEntry[] | undefined> {
    this.stats.indexesRead++;
    let tail: Buffer;
    let tailAt: number;
    if (o.size <= READ_WHOLE_BYTES) {
      tailAt = 0;
      tail = await this.objects.getRange(o.key, 0, o.size, o.etag);
    } else {
      tailAt = o.size - PACK_FOOTER_BYTES;
      tail = await this.objects.getRange(o.key, tailAt, o.size, o.etag);
    }
    if (tail.length !== o.size - tailAt) return undefined;
    const indexAt = decodePackFooter(tail.subarray(tail.length - PACK_FOOTER_BYTES), o.size);
    if (indexAt === undefined) return undefined;
    const index =
      indexAt >= tailAt
        ? tail.subarray(indexAt - tailAt, tail.length - PACK_FOOTER_BYTES)
        : await this.objects.getRange(o.key, indexAt, o.size - PACK_FOOTER_BYTES, o.etag);
    return decodePackIndex(index, indexAt);
  }

  /** Entries already in memory keep their place (any intact copy is as good). */
  private remember(o: Pick<ListedObject, 'key' | 'etag'>, entries: readonly PackEntry[]): void {
    this.known.set(o.key, o.etag);
    for (const e of entries) {
      if (this.distrusted.has(`${o.key}:${e.offset}`) || this.where.has(e.digest)) continue;
      this.where.set(e.digest, { key: o.key, etag: o.etag, ...e });
    }
  }

  /**
   * The copy at `loc` failed its hash: true when another one is found (every
   * pack read again, so a copy published since counts), which later reads
   * then use; false leaves `loc` where it was, so reads keep failing EINTEGRITY.
   */
  async another(digest: string, loc: S3PackLocation): Promise<boolean> {
    const id = `${loc.key}:${loc.offset}`;
    this.distrusted.add(id);
    if (this.where.get(digest)?.key === loc.key) this.where.delete(digest);
    this.known.clear();
    await this.refresh().catch(() => {});
    if (this.where.has(digest)) return true;
    this.distrusted.delete(id);
    this.where.set(digest, loc);
    return false;
  }

  /** Drops what memory holds of pack `key` (deleted, or its record was not there). */
  forgetPack(key: string): void {
    this.known.delete(key);
    for (const [d, loc] of this.where) if (loc.key === key) this.where.delete(d);
  }

  /** Drops a location found stale, so the next {@link locate} reads the packs again. */
  forget(digest: string, loc: S3PackLocation): void {
    const cur = this.where.get(digest);
    if (cur?.key === loc.key && cur.offset === loc.offset) this.where.delete(digest);
    this.forgetPack(loc.key);
  }

  /**
   * The record of `digest` at `loc` as a handle: one ranged GET of header and
   * content, conditional on the pack's ETag. Undefined when the pack is gone
   * or changed, or its record is not `digest`'s; the content is hashed by the caller.
   */
  async open(digest: string, loc: S3PackLocation): Promise<BlobHandle | undefined> {
    let record: Buffer;
    try {
      record = await this.objects.getRange(
        loc.key,
        loc.offset - RECORD_HEADER_BYTES,
        loc.offset + loc.length,
        loc.etag,
      );
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      const status = (err as { details?: { status?: unknown } }).details?.status;
      if (code === 'ENOTFOUND' || status === 412) return undefined;
      throw err;
    }
    const h = decodeRecordHeader(record);
    if (h?.type !== 1 || h.digest !== digest || h.length !== loc.length) {
      // A header that is not the entry's: the index lied or the pack is damaged.
      if (record.length === loc.length + RECORD_HEADER_BYTES) {
        throw new IntegrityError(`the record of artifact ${digest} in S3 pack ${loc.key} is damaged`, {
          digest,
          key: loc.key,
        });
      }
      return undefined;
    }
    const content = record.subarray(RECORD_HEADER_BYTES);
    return packedHandle(content, packedKey(loc));
  }

  /** Packed blobs memory knows of (each digest once) and their bytes. */
  totals(): { blobs: number; bytes: number } {
    let bytes = 0;
    for (const loc of this.where.values()) bytes += loc.length;
    return { blobs: this.where.size, bytes };
  }

  /**
   * Every pack object with its entries, remembered as {@link refresh} does.
   * A pack whose index cannot be read (no valid footer or index, or its GET
   * failed) is listed with no entries, `indexed` false and the reason, and
   * the listing goes on; one deleted since the LIST (a collection) is left
   * out. Only a failed LIST throws. `fresh` reads every index from the
   * bucket, not the host's cache (verify).
   */
  async list(fresh = false): Promise<ListedPack[]> {
    const out: ListedPack[] = [];
    for await (const o of this.objects.list(this.prefix)) {
      const m = PACK_KEY_REST.exec(o.key.slice(this.prefix.length));
      if (!m) continue;
      let entries: PackEntry[] | undefined;
      let unreadable: string | undefined;
      try {
        entries = await this.readEntries(o, fresh);
        if (!entries) unreadable = 'EINTEGRITY: its footer or index is not a pack index';
      } catch (err) {
        const e = toSluiceError(err, 'EDISK');
        if (e.code === 'ENOTFOUND') continue;
        unreadable = `${e.code}: ${e.message}`;
      }
      if (entries) this.remember(o, entries);
      out.push({
        key: o.key,
        owner: m[1] as string,
        seq: Number(m[2]),
        size: o.size,
        etag: o.etag,
        lastModified: o.lastModified,
        entries: entries ?? [],
        indexed: entries !== undefined,
        ...(unreadable !== undefined ? { unreadable } : {}),
      });
    }
    return out;
  }

  /** Uploads what is pending (deferred publishes too), then refuses more. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (!this.flushing && this.pending.length > 0) this.flushing = this.flush();
    while (this.flushing) await this.flushing;
  }
}

/** A packed blob's bytes, read once (at most the pack threshold, under 1 MiB), as a handle. */
function packedHandle(content: Buffer, key: string): BlobHandle {
  return {
    read: async (buffer, offset, length, position) => {
      const n = Math.max(0, Math.min(length, content.length - position));
      if (n > 0)
        content.copy(Buffer.from(buffer.buffer, buffer.byteOffset, buffer.byteLength), offset, position, position + n);
      return { bytesRead: n, buffer };
    },
    identity: async () => ({ key, size: content.length, isFile: true, ino: 0 }),
    packed: undefined,
    close: async () => {},
  };
}

/** The verified-blob cache's key of a packed copy: the pack's ETag and the record's place. */
export function packedKey(loc: S3PackLocation): string {
  return `s3pack:${loc.key}:${loc.etag}:${loc.offset}:${loc.length}`;
}
