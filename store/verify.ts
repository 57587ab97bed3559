/**
 * A whole-store audit: every blob hashed against its name, every blob a
 * manifest references present. `repair` quarantines corrupt blobs, so they
 * are missing rather than wrong and the next publish puts a good one back.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { NotFoundError, toSluiceError } from '../engine/protocol/errors.js';
import { openPackedAt } from './directory/read.js';
import { checkBlob, verifyOpened } from './integrity.js';
import { decodeVerified, tryLoadManifest } from './manifest-load.js';
import { listPacks } from './pack-index.js';
import type { Store } from './store.js';
import { tombstoned } from './tombstone.js';

/** What {@link verifyStore} found. Digest lists are sorted. */
export interface VerifyReport {
  /** Blobs hashed. */
  scanned: number;
  /** Blobs whose content matches their name. */
  ok: number;
  /** Digests of blobs whose content does not match their name. */
  corrupt: string[];
  /** Digests referenced by a manifest in the store but absent from it (and from the tombstones). */
  missing: string[];
  /** Referenced digests among a collection's tombstones: readable, put back by the next collection. */
  tombstoned: string[];
  /** Paths (relative to the store root) under blobs/ that are not blob names; not scanned, not removed. */
  unexpected: string[];
  /** With `repair`: the corrupt blobs moved to quarantine/ (relative paths there). */
  quarantined: string[];
  /** With `repair`: corrupt blobs that could not be moved, and why (`<digest>: <CODE>: <message>`); still corrupt. */
  repairFailed: string[];
  /** Packed blobs hashed (counted in `scanned` too). */
  packed: number;
  /** Bytes after the last whole record: a crash's torn tail, not an error; the next repack drops it. */
  tornPacks: string[];
  /**
   * Packs whose index could not be read (`<path>: <CODE>: <reason>`, S3
   * stores): their blobs were not verified, and a collection refuses to
   * run while one is there (its contents might be referenced).
   */
  unreadablePacks: string[];
}

/** A report of nothing verified yet. */
export function emptyVerifyReport(): VerifyReport {
  return {
    scanned: 0,
    ok: 0,
    corrupt: [],
    missing: [],
    tombstoned: [],
    unexpected: [],
    quarantined: [],
    repairFailed: [],
    packed: 0,
    tornPacks: [],
    unreadablePacks: [],
  };
}

/** Shared by both backends' verify: counts an intact blob and adds a manifest's streams to `referenced`. */
export async function countIntact(
  store: Store,
  digest: string,
  bytes: number,
  report: VerifyReport,
  present: Set<string>,
  referenced: Set<string>,
): Promise<void> {
  present.add(digest);
  report.ok++;
  // Loaded as verifyStore loads it (a module import is cached after the first).
  const { MAX_MANIFEST_BYTES } = await import('./manifest.js');
  if (bytes > MAX_MANIFEST_BYTES) return;
  const manifest = await tryLoadManifest(store, digest).catch(() => undefined);
  for (const s of manifest?.streams ?? []) referenced.add(s.digest);
}

/** Options of {@link verifyStore}. */
export interface VerifyOptions {
  /** Move corrupt blobs to quarantine/ (and drop their line indexes). @default false */
  repair?: boolean;
}

const PREFIX = /^[0-9a-f]{2}$/;
const REST = /^[0-9a-f]{62}$/;

async function listDir(dir: string): Promise<{ name: string; isDir: boolean; isFile: boolean }[]> {
  try {
    const entries = await fsp.readdir(dir, { withFileTypes: true });
    return entries
      .map((e) => ({ name: e.name, isDir: e.isDirectory(), isFile: e.isFile() }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return [];
    throw toSluiceError(err, 'EDISK');
  }
}

/** A corrupt manifest's references are not followed. Memory grows with the number of blobs, never their size. */
export async function verifyStore(store: Store, options: VerifyOptions = {}): Promise<VerifyReport> {
  const report = emptyVerifyReport();
  const present = new Set<string>();
  const referenced = new Set<string>();
  const blobsRel = join('blobs', 'sha256');
  // Loaded here, not at module load: see manifest-load.ts.
  const { MAX_MANIFEST_BYTES } = await import('./manifest.js');
  for (const prefix of await listDir(store.layout.blobs)) {
    if (!prefix.isDir || !PREFIX.test(prefix.name)) {
      report.unexpected.push(join(blobsRel, prefix.name));
      continue;
    }
    for (const entry of await listDir(join(store.layout.blobs, prefix.name))) {
      if (!entry.isFile || !REST.test(entry.name)) {
        report.unexpected.push(join(blobsRel, prefix.name, entry.name));
        continue;
      }
      const digest = prefix.name + entry.name;
      const check = await checkBlob(store, digest);
      // A blob removed while we looked (GC) was never there for this report.
      if (check.status === 'missing') continue;
      report.scanned++;
      if (check.status === 'corrupt') {
        report.corrupt.push(digest);
        // Quarantined, it is missing: manifests that reference it are reported as such in this same run.
        const moved = options.repair ? await quarantine(store, digest, check.ino) : undefined;
        if (moved?.name !== undefined) report.quarantined.push(moved.name);
        else present.add(digest);
        if (moved?.failed !== undefined) report.repairFailed.push(`${digest}: ${moved.failed}`);
        continue;
      }
      await countIntact(store, digest, check.bytes, report, present, referenced);
    }
  }
  for (const pack of await listPacks(store)) {
    if (pack.end < pack.size) report.tornPacks.push(join('packs', pack.name));
    for (const e of pack.entries) {
      const loc = { path: pack.path, offset: e.offset, length: e.length };
      const check = await checkBlob(store, e.digest, async () => {
        const h = await openPackedAt(store, e.digest, loc);
        if (!h) throw new NotFoundError(`packed blob ${e.digest} is gone`, { digest: e.digest });
        return h;
      });
      if (check.status === 'missing') continue;
      report.scanned++;
      report.packed++;
      if (check.status === 'corrupt') {
        if (!report.corrupt.includes(e.digest)) report.corrupt.push(e.digest);
        present.add(e.digest);
        // A record inside a pack cannot be moved aside alone: publishing the content again adds a good copy.
        if (options.repair)
          report.repairFailed.push(`${e.digest}: EINTEGRITY: packed in packs/${pack.name}; left in place`);
        continue;
      }
      present.add(e.digest);
      report.ok++;
      if (check.bytes <= MAX_MANIFEST_BYTES) {
        const h = await openPackedAt(store, e.digest, loc).catch(() => undefined);
        const manifest = h
          ? await decodeVerified(await verifyOpened(store, e.digest, h)).catch(() => undefined)
          : undefined;
        for (const st of manifest?.streams ?? []) referenced.add(st.digest);
      }
    }
  }
  report.corrupt.sort();
  const absent = [...referenced].filter((d) => !present.has(d));
  const aside = await tombstoned(store, absent);
  report.missing = absent.filter((d) => !aside.has(d)).sort();
  report.tombstoned = [...aside].sort();
  return report;
}

/**
 * Named after its inode, so no two repairs take one name. Only the file found
 * corrupt moves: a publisher may have healed the blob since, so the moved
 * inode is checked and a good copy moved back. Failures are reported, not thrown.
 */
async function quarantine(
  store: Store,
  digest: string,
  ino: number | undefined,
): Promise<{ name?: string; failed?: string }> {
  if (ino === undefined) return { failed: 'EINTEGRITY: it could not be told which file was corrupt; left in place' };
  const blob = store.layout.blobPath(digest);
  const name = `${digest}.${ino}`;
  const aside = join(store.layout.quarantine, name);
  try {
    await store.io.mkdir(store.layout.quarantine);
    await store.io.rename(blob, aside);
  } catch (err) {
    const e = toSluiceError(err, 'EDISK');
    return { failed: `${e.code}: ${e.message}` };
  }
  const moved = await fsp.lstat(aside).catch(() => undefined);
  if (moved?.ino !== ino) {
    // Healed in between: the good copy goes back (or, if yet another was placed, it is as good).
    await store.io.rename(aside, blob).catch(() => {});
    return { failed: 'it was replaced by a good copy while it was checked; left in place' };
  }
  await store.io.unlink(store.layout.indexPath(digest)).catch(() => {});
  return { name };
}
