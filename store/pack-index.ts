/**
 * Where packed blobs are, per open store: digest → (pack, offset, length),
 * a hint checked against the record header and the hash. Packs are only
 * added, appended to or removed whole, so a refresh reads on from where it left off.
 */
import { join } from 'node:path';
import { toSluiceError } from '../engine/protocol/errors.js';
import { READ_STORE_FILE, type StoreFile } from './file.js';
import { readdirOrEmpty } from './owned-files.js';
import {
  decodeIndex,
  decodeRecordHeader,
  PACK_MAGIC,
  type PackEntry,
  RECORD_BLOB,
  RECORD_HEADER_BYTES,
  scanPack,
} from './pack-format.js';
import { PackLocations } from './pack-locations.js';
import type { Store } from './store.js';

/** A packed blob's place. */
export interface PackLocation {
  path: string;
  /** Offset of the content. */
  offset: number;
  /** Content length. */
  length: number;
  /** Known durable (ours, copied by GC, or indexed); a scanned record is read, never deduplicated onto. */
  committed?: boolean;
}

/** Pack file names: the owner's pid, a random part, `.pack`. */
export const PACK_NAME = /^([1-9][0-9]{0,9})-[0-9a-z]+\.pack$/;

/** The index file beside pack `path`. */
export function packIndexPath(path: string): string {
  return `${path.slice(0, -'.pack'.length)}.idx`;
}

/** What is known of one pack. */
interface KnownPack {
  /** Bytes of the index file consumed. */
  indexRead: number;
  /** Pack offset up to which every record is known. */
  covered: number;
  sealed: boolean;
}

/** Everything a full listing of a pack gives (GC and verify). */
export interface ListedPack {
  name: string;
  path: string;
  size: number;
  mtimeMs: number;
  entries: PackEntry[];
  sealed: boolean;
  /** Where the valid records end (less than size: a torn tail). */
  end: number;
}

const isMissing = (err: unknown) => (err as { code?: unknown }).code === 'ENOENT';

/** Positioned reads of `fh`, as scanPack takes them. */
function readerOf(fh: StoreFile) {
  return async (buf: Buffer, offset: number, length: number, position: number) =>
    (await fh.read(buf, offset, length, position)).bytesRead;
}

/** Undefined when gone or not a regular file (a FIFO or link planted there is no pack). */
export async function readPack(
  store: Store,
  path: string,
  known: KnownPack = { indexRead: 0, covered: 0, sealed: false },
  useIndex = true,
): Promise<
  { entries: PackEntry[]; indexed: number; known: KnownPack; size: number; mtimeMs: number; end: number } | undefined
> {
  let fh: StoreFile;
  try {
    fh = await store.io.open(path, READ_STORE_FILE);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (isMissing(err) || code === 'ELOOP') return undefined;
    throw toSluiceError(err, 'EDISK');
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) return undefined;
    const entries: PackEntry[] = [];
    let indexed = 0;
    const next = { ...known };
    if (next.covered < st.size && !next.sealed) {
      // The index first; only a run of entries following each other counts, its last checked against
      // its header; past that the pack is scanned.
      const fromIndex = useIndex ? await readIndexTail(store, path, next.indexRead, st.size) : undefined;
      if (fromIndex) {
        next.indexRead = fromIndex.read;
        const run: PackEntry[] = [];
        let at = next.covered === 0 ? PACK_MAGIC.length : next.covered;
        for (const e of fromIndex.entries) {
          if (e.offset - RECORD_HEADER_BYTES < at) continue;
          if (e.offset - RECORD_HEADER_BYTES !== at) break;
          run.push(e);
          at = e.offset + e.length;
        }
        const last = run[run.length - 1];
        if (last && (await headerMatches(fh, last))) {
          entries.push(...run);
          indexed = run.length;
          next.covered = at;
        }
      }
      const scan = await scanPack(readerOf(fh), st.size, next.covered);
      if (scan.badMagic) return { entries: [], indexed: 0, known: next, size: st.size, mtimeMs: st.mtimeMs, end: 0 };
      entries.push(...scan.entries);
      next.covered = scan.end;
      next.sealed = scan.sealed;
    }
    return { entries, indexed, known: next, size: st.size, mtimeMs: st.mtimeMs, end: next.covered };
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  } finally {
    await fh.close().catch(() => {});
  }
}

/** True when the record header before `e`'s content names `e`'s digest and length. */
async function headerMatches(fh: StoreFile, e: PackEntry): Promise<boolean> {
  const h = Buffer.alloc(RECORD_HEADER_BYTES);
  const { bytesRead } = await fh.read(h, 0, h.length, e.offset - RECORD_HEADER_BYTES);
  const rec = bytesRead === h.length ? decodeRecordHeader(h) : undefined;
  return rec?.type === RECORD_BLOB && rec.digest === e.digest && rec.length === e.length;
}

/** Entries of the index of pack `path` from byte `from` (whole entries only), or undefined without a usable index. */
async function readIndexTail(
  store: Store,
  path: string,
  from: number,
  packSize: number,
): Promise<{ entries: PackEntry[]; read: number } | undefined> {
  let fh: StoreFile;
  try {
    fh = await store.io.open(packIndexPath(path), READ_STORE_FILE);
  } catch {
    return undefined;
  }
  try {
    const st = await fh.stat();
    if (!st.isFile() || st.size <= from) return undefined;
    const buf = await fh.readFile();
    const entries = decodeIndex(buf, packSize);
    if (!entries) return undefined;
    const whole = buf.length - ((buf.length - 8) % 48);
    return { entries, read: whole };
  } catch {
    return undefined;
  } finally {
    await fh.close().catch(() => {});
  }
}

/** Pack files in `dir` (names of the pack form only). */
export async function packNames(store: Store, dir = store.layout.packs): Promise<string[]> {
  return (await readdirOrEmpty(store.io, dir)).filter((n) => PACK_NAME.test(n)).sort();
}

/** Every pack in packs/ read whole (GC's listing, verify's audit). */
export async function listPacks(store: Store): Promise<ListedPack[]> {
  const out: ListedPack[] = [];
  for (const name of await packNames(store)) {
    const path = join(store.layout.packs, name);
    const r = await readPack(store, path);
    if (!r) continue;
    out.push({
      name,
      path,
      size: r.size,
      mtimeMs: r.mtimeMs,
      entries: r.entries,
      sealed: r.known.sealed,
      end: r.end,
    });
  }
  return out;
}

/** The in-memory map of one store's packed blobs (see the module comment). */
export class PackIndex extends PackLocations<PackLocation> {
  private readonly store: Store;
  private readonly packs = new Map<string, KnownPack>();
  private loaded = false;
  /** Packs whose index pointed at a record that is not there: read again from the pack alone. */
  private readonly distrusted = new Set<string>();

  constructor(store: Store) {
    super();
    this.store = store;
  }

  /** The location memory holds for `digest` (no I/O): a publisher's dedup check. */
  known(digest: string): PackLocation | undefined {
    return this.where.get(digest);
  }

  /** Packed blobs memory knows of (each digest once) and their bytes: the store walk's counts. */
  totals(): { blobs: number; bytes: number } {
    let bytes = 0;
    for (const loc of this.where.values()) bytes += loc.length;
    return { blobs: this.where.size, bytes };
  }

  /** True once the packs present at first use have been read. */
  get isLoaded(): boolean {
    return this.loaded;
  }

  /** Records where blob `entry` is; `committed` when it is known durable (see {@link PackLocation.committed}). */
  add(path: string, entry: PackEntry, committed: boolean): void {
    this.where.set(entry.digest, { path, offset: entry.offset, length: entry.length, committed });
  }

  // The pack is then read again from its own records, its index no longer trusted.
  forget(digest: string, loc: PackLocation): void {
    const cur = this.where.get(digest);
    if (cur && cur.path === loc.path && cur.offset === loc.offset) this.where.delete(digest);
    // The rest memory holds of that pack is as doubtful.
    this.forgetPack(loc.path);
    this.packs.clear();
    this.distrusted.add(loc.path);
  }

  // A copy elsewhere may have been passed over: every pack is read again next refresh.
  forgetPack(path: string): void {
    let had = this.packs.delete(path);
    for (const [d, loc] of this.where) {
      if (loc.path !== path) continue;
      this.where.delete(d);
      had = true;
    }
    if (had) this.packs.clear();
  }

  protected async refreshOnce(): Promise<void> {
    const present = new Set<string>();
    for (const name of await packNames(this.store)) {
      const path = join(this.store.layout.packs, name);
      present.add(path);
      const known = this.packs.get(path);
      const r = await readPack(this.store, path, known, !this.distrusted.has(path));
      if (!r) continue;
      this.packs.set(path, r.known);
      // Entries already in memory keep their place (a copy this store appended is as good).
      for (const [i, e] of r.entries.entries()) if (!this.where.has(e.digest)) this.add(path, e, i < r.indexed);
    }
    for (const path of [...this.packs.keys()]) if (!present.has(path)) this.forgetPack(path);
    this.loaded = true;
  }
}
