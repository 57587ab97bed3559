/**
 * The in-memory model of a store and the real system it is compared with,
 * for the fast-check model-based test (store-model.test.ts). The model says
 * which blobs exist and in what state (intact, bit-flipped, truncated), what
 * pins and session records hold, and which manifests exist; from that it
 * predicts reads (content, ENOTFOUND, EINTEGRITY, ENOTMANIFEST,
 * EUNKNOWNSTREAM), garbage collection and verify.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { SessionRecorder } from '../../engine/sessions/recorder.js';
import { realIO, type StoreIO } from '../../store/io.js';
import { type Pin, Store } from '../../store/store.js';
import { deadPid } from '../sessions/helpers.js';
import { FaultyIO } from '../support/faulty-io.js';
import { sha256 } from '../support/invariants.js';

/** What a present blob is. */
export type BlobState = 'ok' | 'flipped' | 'truncated';

/** The model. */
export interface Model {
  /** Blobs present in blobs/, by digest. */
  present: Map<string, BlobState>;
  /** The original content of every digest ever published or attempted. */
  contents: Map<string, Buffer>;
  /** Pins of the live store instance, by test-side id. */
  pins: Map<number, Set<string>>;
  nextPin: number;
  /** Digests referenced by live session records. */
  roots: Set<string>;
  /** Manifests ever published: their stream names and digests, in order. */
  manifests: Map<string, Array<{ name: string; digest: string }>>;
  /** Temporary files and pins a crashed instance left (renamed to a dead owner): the next GC reclaims them. */
  deadTmp: number;
  deadPins: number;
  /** Trash directories a crashed collection left. */
  deadTrash: number;
}

/** The system under test. */
export interface Real {
  dir: string;
  store: Store;
  io: FaultyIO;
  recorder: SessionRecorder;
  pins: Map<number, Pin>;
}

/** A digest nothing ever has. */
export const NEVER = sha256('never published by the model test');

/** Durability is not what this test checks (no power loss is simulated), and fsync costs most of its time. */
const fastBase: StoreIO = { ...realIO, fsync: async () => {}, fsyncDir: async () => {}, datasync: async () => {} };

export function newModel(): Model {
  return {
    present: new Map(),
    contents: new Map(),
    pins: new Map(),
    nextPin: 1,
    roots: new Set(),
    manifests: new Map(),
    deadTmp: 0,
    deadPins: 0,
    deadTrash: 0,
  };
}

export async function openReal(dir: string): Promise<Real> {
  const io = new FaultyIO(dir, fastBase);
  const store = await Store.open(dir, { io });
  return { dir, store, io, recorder: new SessionRecorder(store), pins: new Map() };
}

/** Lines by the shared rule. */
export function linesOf(b: Buffer): number {
  if (b.length === 0) return 0;
  let n = 0;
  for (const x of b) if (x === 0x0a) n++;
  return b[b.length - 1] === 0x0a ? n : n + 1;
}

/** Every digest the model knows of, plus one that never existed: read targets. */
export function known(m: Model): string[] {
  return [...m.contents.keys(), NEVER];
}

/**
 * The model's side of publishing `content`: the blob is intact afterwards.
 * Only an intact copy deduplicates; a damaged one (flipped or truncated) is
 * replaced by the publisher's copy, since a publish that would deduplicate
 * hashes the stored blob unless this store verified that very file, and a
 * damage through the filesystem changes the file's identity (docs/store.md,
 * "heals"). Returns the expected digest and whether it deduplicates.
 */
export function modelPublish(m: Model, content: Buffer): { digest: string; deduplicated: boolean } {
  const digest = sha256(content);
  m.contents.set(digest, content);
  const before = m.present.get(digest);
  if (before === 'ok') return { digest, deduplicated: true };
  m.present.set(digest, 'ok');
  return { digest, deduplicated: false };
}

/** What GC must keep: roots and pins, then the streams of every intact kept manifest, transitively. */
export function modelKeep(m: Model, withPins = true): Set<string> {
  const keep = new Set<string>(m.roots);
  if (withPins) for (const p of m.pins.values()) for (const d of p) keep.add(d);
  const work = [...keep];
  while (work.length > 0) {
    const d = work.pop() as string;
    if (m.present.get(d) !== 'ok') continue;
    for (const s of m.manifests.get(d) ?? []) {
      if (!keep.has(s.digest)) {
        keep.add(s.digest);
        work.push(s.digest);
      }
    }
  }
  return keep;
}

/** The code (or content) a bare read of `digest` must give. */
export function expectedBareRead(m: Model, digest: string): { code: string } | { content: string; lines: number } {
  const state = m.present.get(digest);
  if (state === undefined) return { code: 'ENOTFOUND' };
  if (state !== 'ok') return { code: 'EINTEGRITY' };
  const c = m.contents.get(digest) as Buffer;
  return { content: c.toString('utf8'), lines: linesOf(c) };
}

/** The code (or content) reading stream `name` of `digest` must give. */
export function expectedStreamRead(
  m: Model,
  digest: string,
  name: string,
): { code: string } | { content: string; lines: number } {
  const state = m.present.get(digest);
  if (state === undefined) return { code: 'ENOTFOUND' };
  if (state !== 'ok') return { code: 'EINTEGRITY' };
  const streams = m.manifests.get(digest);
  if (!streams) return { code: 'ENOTMANIFEST' };
  const s = streams.find((x) => x.name === name);
  if (!s) return { code: 'EUNKNOWNSTREAM' };
  return expectedBareRead(m, s.digest);
}

/**
 * A crash and restart: the instance is abandoned where it stopped (its I/O
 * already fails everything), every file it owned in tmp/, pins/ and gc/trash/
 * is handed to a dead process, as the kernel would leave them after SIGKILL,
 * and a fresh instance opens the store. Returns the new system.
 */
export async function crashAndRestart(m: Model, r: Real): Promise<Real> {
  // Dead from here on, whether or not the crash point was reached: nothing more reaches the disk.
  r.io.kill();
  // Only closes the descriptors (their unlink fails): the pin files stay, as after SIGKILL.
  for (const p of r.pins.values()) await p.release();
  // Closes the pin journal's descriptor; its removal fails like every other operation, so the file stays.
  await r.store.close();
  await r.recorder.close().catch(() => {});
  const dead = await deadPid();
  const mine = `${process.pid}-`;
  const handOver = async (dir: string): Promise<number> => {
    let n = 0;
    for (const name of await fsp.readdir(dir).catch(() => [] as string[])) {
      if (!name.startsWith(mine)) continue;
      await fsp.rename(join(dir, name), join(dir, `${dead}-${name.slice(mine.length)}`));
      n++;
    }
    return n;
  };
  m.deadTmp += await handOver(r.store.layout.tmp);
  m.deadPins += await handOver(r.store.layout.pins);
  m.deadTrash += await handOver(r.store.layout.trash);
  // A collection that died holding the GC lock (or preparing it) left its owner file: the dead pid's, so the
  // next one breaks it.
  await handOver(join(r.store.layout.gc, 'lock'));
  const prep = `lock.prep-${mine}`;
  for (const name of await fsp.readdir(r.store.layout.gc).catch(() => [] as string[])) {
    if (!name.startsWith(prep)) continue;
    await handOver(join(r.store.layout.gc, name));
    await fsp.rename(
      join(r.store.layout.gc, name),
      join(r.store.layout.gc, `lock.prep-${dead}-${name.slice(prep.length)}`),
    );
  }
  m.pins.clear();
  return openReal(r.dir);
}

/** The state of the blob file for `digest` as found on disk (after a crash, to settle what the model cannot know). */
export async function observe(r: Real, digest: string, original: Buffer): Promise<BlobState | undefined> {
  let buf: Buffer;
  try {
    buf = await fsp.readFile(r.store.layout.blobPath(digest));
  } catch {
    return undefined;
  }
  if (sha256(buf) === digest) return 'ok';
  return buf.length === original.length ? 'flipped' : 'truncated';
}
