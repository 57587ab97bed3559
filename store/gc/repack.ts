/**
 * The collector's side of packs. A pack is rewritten only once its owner can
 * append nothing more (sealed, or owner dead). Inside sweep.ts: (1) copy its
 * marked blobs into a new pack, synced (`repack-copied`); (2) move the old
 * packs into the trash (`repack-tombstoned`), after which a publisher's
 * dedup, opening the pack by name, fails and it appends its own copy;
 * (3) re-check, copying what is kept, synced; (4) only then unlink. A crash
 * loses nothing: before (4) every old pack exists, and what (4) deletes was
 * durable in the new pack first.
 */

import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { join } from 'node:path';
import { openPackedAt } from '../directory/read.js';
import type { StoreFile } from '../file.js';
import { writeAll } from '../io.js';
import { type OwnerCheck, ownedName } from '../owners.js';
import { encodeIndexEntry, encodeRecordHeader, PACK_INDEX_MAGIC, PACK_MAGIC, type PackEntry } from '../pack-format.js';
import { type ListedPack, PACK_NAME, type PackIndex, packIndexPath } from '../pack-index.js';
import type { Store } from '../store.js';

/** True when a collection may rewrite `pack`: sealed, or its owner dead (never this store's active pack). */
export function mayRepack(pack: ListedPack, owners: OwnerCheck): boolean {
  if (pack.end === 0) return false; // not a pack this store wrote (bad magic): left for an operator
  const m = PACK_NAME.exec(pack.name);
  if (!m) return false;
  if (pack.sealed) return true;
  const pid = Number(m[1]);
  return !owners.alive(pid, pack.mtimeMs, pack.name);
}

/** Reads the content of packed entry `e` of the pack at `path` and checks its hash; undefined when it does not match. */
export async function readPackedChecked(store: Store, path: string, e: PackEntry): Promise<Buffer | undefined> {
  const h = await openPackedAt(store, e.digest, { path, offset: e.offset, length: e.length });
  if (!h) return undefined;
  try {
    const buf = Buffer.allocUnsafe(e.length);
    let off = 0;
    while (off < e.length) {
      const { bytesRead } = await h.read(buf, off, e.length - off, off);
      if (bytesRead === 0) return undefined;
      off += bytesRead;
    }
    return createHash('sha256').update(buf).digest('hex') === e.digest ? buf : undefined;
  } finally {
    await h.close();
  }
}

/** The pack a collection writes the blobs it keeps into. */
export class RepackTarget {
  private readonly store: Store;
  readonly path: string;
  private fh: StoreFile | undefined;
  private size = 0;
  private readonly entries: PackEntry[] = [];
  private readonly has = new Set<string>();
  private dirty = false;
  private readonly index: PackIndex;

  /** A new pack in `store`, whose copies `index` (the store's map of packed blobs) learns once synced. */
  constructor(store: Store, index: PackIndex) {
    this.store = store;
    this.index = index;
    this.path = join(store.layout.packs, `${ownedName()}gc.pack`);
  }

  /** Digests copied so far. */
  get copied(): number {
    return this.entries.length;
  }

  /** True when `digest` is in this pack already. */
  holds(digest: string): boolean {
    return this.has.has(digest);
  }

  /** Appends blob `digest` (not synced: {@link sync}). */
  async add(digest: string, content: Uint8Array): Promise<void> {
    if (this.has.has(digest)) return;
    const io = this.store.io;
    if (!this.fh) {
      this.fh = await io.open(
        this.path,
        constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_APPEND,
        0o600,
      );
      await writeAll(io, this.fh, PACK_MAGIC, null);
      this.size = PACK_MAGIC.length;
    }
    const header = encodeRecordHeader(digest, content.length);
    await writeAll(io, this.fh, Buffer.concat([header, content]), null);
    this.entries.push({ digest, offset: this.size + header.length, length: content.length });
    this.size += header.length + content.length;
    this.has.add(digest);
    this.dirty = true;
  }

  /** Makes what was added durable: fdatasync of the pack, fsync of packs/ (its name). */
  async sync(): Promise<void> {
    if (!this.fh || !this.dirty) return;
    await this.store.io.datasync(this.fh);
    await this.store.io.fsyncDir(this.store.layout.packs);
    this.dirty = false;
    for (const e of this.entries) this.index.add(this.path, e, true);
  }

  /** Seals the pack (nothing more goes in: the next collection may rewrite it) and writes its index; best effort. */
  async finish(): Promise<void> {
    const fh = this.fh;
    if (!fh) return;
    this.fh = undefined;
    const io = this.store.io;
    await writeAll(io, fh, encodeRecordHeader(undefined, 0), null).catch(() => {});
    await fh.close().catch(() => {});
    try {
      const idx = await io.open(
        packIndexPath(this.path),
        constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY,
        0o600,
      );
      try {
        await writeAll(io, idx, Buffer.concat([PACK_INDEX_MAGIC, ...this.entries.map(encodeIndexEntry)]), 0);
      } finally {
        await idx.close();
      }
    } catch {
      // Only a cache: readers scan the pack.
    }
  }
}

/** Moves pack `path` (and its index) into `trash`, forgetting it in `index`; false when it is gone already. */
export async function tombstonePack(store: Store, path: string, trash: string, index: PackIndex): Promise<boolean> {
  const name = path.slice(path.lastIndexOf('/') + 1);
  try {
    await store.io.rename(path, join(trash, name));
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return false;
    throw err;
  }
  index.forgetPack(path);
  return true;
}

/** Puts a moved pack back into packs/. */
export async function restorePack(store: Store, trashPath: string): Promise<void> {
  const name = trashPath.slice(trashPath.lastIndexOf('/') + 1);
  await store.io.rename(trashPath, join(store.layout.packs, name));
}

/** Unlinks a moved pack and the index it left in packs/. */
export async function dropPack(store: Store, trashPath: string): Promise<void> {
  const name = trashPath.slice(trashPath.lastIndexOf('/') + 1);
  await store.io.unlink(trashPath);
  await store.io.unlink(packIndexPath(join(store.layout.packs, name))).catch(() => {});
}

/** Index files in packs/ whose pack is gone (a collection that died between unlinking the two). */
export async function orphanPackIndexes(store: Store, names: readonly string[]): Promise<number> {
  const packs = new Set(names.filter((n) => PACK_NAME.test(n)));
  let removed = 0;
  for (const n of names) {
    if (!/^[1-9][0-9]{0,9}-[0-9a-z]+\.idx$/.test(n)) continue;
    if (packs.has(`${n.slice(0, -4)}.pack`)) continue;
    // The writer creates the pack before its index, so an index without its pack has lost it for good.
    const stillNoPack = await store.io.lstat(join(store.layout.packs, `${n.slice(0, -4)}.pack`)).then(
      () => false,
      () => true,
    );
    if (!stillNoPack) continue;
    if (
      await store.io.unlink(join(store.layout.packs, n)).then(
        () => true,
        () => false,
      )
    )
      removed++;
  }
  return removed;
}
