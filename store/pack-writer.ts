/**
 * Appending small blobs to this store's own pack (`packs/<pid>-<random>.pack`,
 * written by no other process) with group commit: one write and one
 * fdatasync per batch, a publish resolving after its batch's sync. After a
 * failed write or sync the pack is retired, so bytes of unknown durability
 * are never followed by a committed record. A seal tells a collection the
 * owner is done with the pack (store/gc/repack.ts).
 */
import { constants } from 'node:fs';
import { toSluiceError } from '../engine/protocol/errors.js';
import { crashPoint } from './crash-point.js';
import type { StoreFile } from './file.js';
import { type StoreIO, writeAll } from './io.js';
import { ownedName } from './owners.js';
import {
  encodeIndexEntry,
  encodeRecordHeader,
  encodeRecords,
  PACK_INDEX_MAGIC,
  PACK_MAGIC,
  type PackEntry,
} from './pack-format.js';
import { packIndexPath } from './pack-index.js';

/** A pack is sealed and a new one begun once it holds this many bytes. */
const PACK_ROTATE_BYTES = 64 * 1024 * 1024;
// The index is a cache (a reader scans past it), so a write per batch would cost a syscall per
// publish for nothing a reader needs.
const INDEX_EVERY = 64;
/** At most this many blobs in one batch (IOV_MAX is 1024; two buffers per blob). */
const MAX_BATCH_BLOBS = 256;

const CREATE_FLAGS = constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY;

interface Pending {
  digest: string;
  content: Uint8Array;
  resolve: (where: Appended) => void;
  reject: (err: unknown) => void;
}

/** Where an appended blob went. */
export interface Appended {
  path: string;
  entry: PackEntry;
  /** `<dev>:<ino>` of the pack (the integrity cache keys packed copies by it). */
  fileId: string;
}

interface OpenPack {
  path: string;
  fileId: string;
  fh: StoreFile;
  size: number;
  /** The index file (a cache), or undefined when it could not be created. */
  index: StoreFile | undefined;
  /** Committed entries not yet written to the index (see {@link INDEX_EVERY}). */
  unindexed: PackEntry[];
  /** packs/ has been fsynced since this pack was created. */
  named: boolean;
}

/** Counters of the group commit (tests and benchmarks read them). */
export interface PackStats {
  /** Blobs appended. */
  blobs: number;
  /** Batches written (each one fdatasync). */
  batches: number;
  /** Packs created. */
  packs: number;
}

/** One store's pack appender (see the module comment). */
export class PackWriter {
  private readonly io: StoreIO;
  private readonly dir: string;
  private readonly syncDir: (dir: string) => Promise<void>;
  private readonly prefix = ownedName();
  private counter = 0;
  private pack: OpenPack | undefined;
  private pending: Pending[] = [];
  /** Callers of {@link seal} waiting for the current pack to be sealed. */
  private sealing: Array<() => void> = [];
  private flushing: Promise<void> | undefined;
  private closed = false;
  /** Called for every committed blob (the store's pack index). */
  private readonly committed: (path: string, entry: PackEntry) => void;
  /** Writes the in-memory pins to the journal, since any collection may rewrite a sealed pack; a rejection leaves it unsealed. */
  private readonly beforeSeal: () => Promise<void>;
  readonly stats: PackStats = { blobs: 0, batches: 0, packs: 0 };

  constructor(
    io: StoreIO,
    dir: string,
    syncDir: (dir: string) => Promise<void>,
    committed: (path: string, entry: PackEntry) => void,
    beforeSeal: () => Promise<void> = async () => {},
  ) {
    this.io = io;
    this.dir = dir;
    this.syncDir = syncDir;
    this.committed = committed;
    this.beforeSeal = beforeSeal;
  }

  /** The pack being appended to now, if any (a collection leaves it alone). */
  get activePath(): string | undefined {
    return this.pack?.path;
  }

  /** Appends blob `digest` with `content`; resolves once it is durable. */
  append(digest: string, content: Uint8Array): Promise<Appended> {
    if (this.closed) return Promise.reject(toSluiceError(new Error('the store is closed'), 'ECLOSED'));
    return new Promise((resolve, reject) => {
      this.pending.push({ digest, content, resolve, reject });
      this.flushing ??= this.flush();
    });
  }

  /** A collection in this process seals its own pack first, or it could never rewrite it while the store is open. */
  seal(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      this.sealing.push(resolve);
      this.flushing ??= this.flush();
    });
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0 || this.sealing.length > 0) {
      if (this.pending.length === 0) {
        const waiting = this.sealing.splice(0);
        await this.retire(true);
        for (const w of waiting) w();
        continue;
      }
      const batch = this.pending.splice(0, MAX_BATCH_BLOBS);
      let pack: OpenPack | undefined;
      try {
        pack = this.pack ?? (await this.open());
        const bufs: Uint8Array[] = [];
        if (pack.size === 0) bufs.push(PACK_MAGIC);
        const { entries, end: at } = encodeRecords(batch, pack.size === 0 ? PACK_MAGIC.length : pack.size, bufs);
        await writeAll(this.io, pack.fh, bufs.length === 1 ? (bufs[0] as Uint8Array) : Buffer.concat(bufs), null);
        crashPoint('pack-written');
        await this.io.datasync(pack.fh);
        if (!pack.named) {
          // The pack's name must be durable before anything in it counts as published.
          await this.syncDir(this.dir);
          pack.named = true;
        }
        crashPoint('pack-synced');
        pack.size = at;
        this.stats.batches++;
        this.stats.blobs += batch.length;
        for (const e of entries) this.committed(pack.path, e);
        for (let i = 0; i < batch.length; i++) {
          (batch[i] as Pending).resolve({ path: pack.path, entry: entries[i] as PackEntry, fileId: pack.fileId });
        }
        pack.unindexed.push(...entries);
        if (pack.unindexed.length >= INDEX_EVERY) await this.writeIndex(pack);
        if (pack.size >= PACK_ROTATE_BYTES) await this.retire(true);
      } catch (err) {
        // Durability unknown for this batch: nothing is appended after it (see the module comment).
        if (pack && this.pack === pack) await this.retire(false);
        const e = toSluiceError(err, 'EDISK');
        for (const p of batch) p.reject(e);
      }
    }
    this.flushing = undefined;
  }

  /** Writes the committed entries the index lacks: a cache, so a failure only stops indexing this pack. */
  private async writeIndex(pack: OpenPack): Promise<void> {
    const entries = pack.unindexed.splice(0);
    if (!pack.index || entries.length === 0) return;
    try {
      await writeAll(this.io, pack.index, Buffer.concat(entries.map(encodeIndexEntry)), null);
    } catch {
      await pack.index.close().catch(() => {});
      pack.index = undefined;
    }
  }

  private async open(): Promise<OpenPack> {
    const path = `${this.dir}/${this.prefix}${(this.counter++).toString(36)}.pack`;
    const fh = await this.io.open(path, CREATE_FLAGS | constants.O_APPEND, 0o600);
    let fileId: string;
    try {
      const st = await fh.stat({ bigint: true });
      fileId = `${st.dev}:${st.ino}`;
    } catch (err) {
      await fh.close().catch(() => {});
      throw err;
    }
    let index: StoreFile | undefined;
    try {
      index = await this.io.open(packIndexPath(path), CREATE_FLAGS | constants.O_APPEND, 0o600);
      await writeAll(this.io, index, PACK_INDEX_MAGIC, null);
    } catch {
      // Without an index, readers scan the pack.
      await index?.close().catch(() => {});
      index = undefined;
    }
    this.stats.packs++;
    this.pack = { path, fileId, fh, size: 0, index, unindexed: [], named: false };
    return this.pack;
  }

  // The pack stops being the active one before the in-memory pins are written out, so no later hold
  // can be for it (DirectoryPacks.ownActiveCopy).
  private async retire(seal: boolean): Promise<void> {
    const pack = this.pack;
    if (!pack) return;
    this.pack = undefined;
    if (seal && pack.size > 0) {
      const pinned = await this.beforeSeal().then(
        () => true,
        () => false,
      );
      // Unsealed, the pack is rewritten by no collection while this process lives; its pins then die with it.
      if (pinned) await writeAll(this.io, pack.fh, encodeRecordHeader(undefined, 0), null).catch(() => {});
    }
    await pack.fh.close().catch(() => {});
    await this.writeIndex(pack);
    await pack.index?.close().catch(() => {});
  }

  /** Waits for pending appends, seals the pack and closes it. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    while (this.flushing) await this.flushing;
    await this.retire(true);
  }
}
