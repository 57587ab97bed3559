/** The files beside an S3 mirror: its state, and the adoption of a dead owner's mirror by rename; nothing here follows a link or waits on a FIFO. */
import { constants, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { OwnerCheck, ownerPid } from '../../store/owners.js';
import type { Store } from '../../store/store.js';
import { sessionDir } from './session-id.js';

/** Suffix of mirror files. */
export const MIRROR_SUFFIX = '.mirror';
/** Suffix of a mirror's state (how far it is complete), beside it. */
export const STATE_SUFFIX = '.mstate';
const STATE_TMP_SUFFIX = '.mtemp';

/** One session's mirror in one store instance. */
export interface Mirror {
  /** `sessions/<id>/<pid>-<token>`: the file is this with `.mirror`, its state with `.mstate`. */
  stem: string;
  path: string;
  /** Inode of the file once created (0 before): another file at the path means it was removed. */
  ino: bigint;
  /** Bytes of the file that are the mirrored batches (it may hold more: a cut-off copy). */
  end: number;
  last: { seq: number; etag: string } | undefined;
  modifiedAt: Date;
  /** Syncs of this mirror run one at a time. */
  queue: Promise<unknown>;
}

interface MirrorState {
  end: number;
  seq: number;
  etag: string;
  modifiedAt: number;
}

/** Records how far the mirror is complete (tmp file, then rename: a reader sees the old state or the new). */
export async function writeState(m: Mirror): Promise<void> {
  if (!m.last) return;
  const state: MirrorState = { end: m.end, seq: m.last.seq, etag: m.last.etag, modifiedAt: m.modifiedAt.getTime() };
  const tmp = `${m.stem}${STATE_TMP_SUFFIX}`;
  try {
    await fsp.writeFile(tmp, JSON.stringify(state), { mode: 0o600 });
    await fsp.rename(tmp, `${m.stem}${STATE_SUFFIX}`);
  } catch {
    // Only a later process's shortcut is lost.
    await fsp.unlink(tmp).catch(() => {});
  }
}

const MAX_STATE_BYTES = 4096;

/** The text of a dead owner's state file, or `''` when it is not a regular file of a state's size (a FIFO would stall every sync). */
async function readStateFile(path: string): Promise<string> {
  let fh: fsp.FileHandle;
  try {
    fh = await fsp.open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch {
    return '';
  }
  try {
    const st = await fh.stat();
    if (!st.isFile() || st.size > MAX_STATE_BYTES) return '';
    const buf = Buffer.alloc(st.size);
    const { bytesRead } = await fh.read(buf, 0, st.size, 0);
    return buf.toString('utf8', 0, bytesRead);
  } catch {
    return '';
  } finally {
    await fh.close().catch(() => {});
  }
}

function parseState(text: string): MirrorState | undefined {
  try {
    const v = JSON.parse(text) as Partial<MirrorState>;
    const ok =
      Number.isSafeInteger(v.end) &&
      (v.end as number) > 0 &&
      Number.isSafeInteger(v.seq) &&
      (v.seq as number) >= 0 &&
      typeof v.etag === 'string' &&
      Number.isFinite(v.modifiedAt);
    return ok ? (v as MirrorState) : undefined;
  } catch {
    return undefined;
  }
}

/** Adopts into `m` a dead owner's mirror of session `id` with a valid state, and removes dead owners' other files (caches). */
export async function adoptDeadMirror(store: Store, id: string, m: Mirror): Promise<void> {
  const dir = sessionDir(store.layout, id);
  let names: string[];
  try {
    names = await fsp.readdir(dir);
  } catch {
    return;
  }
  const owners = new OwnerCheck();
  const dead = new Set<string>();
  for (const name of names) {
    const pid = ownerPid(name);
    if (pid === undefined || !/\.(mirror|mstate|mtemp)$/.test(name)) continue;
    const st = await fsp.stat(join(dir, name)).catch(() => undefined);
    if (st && !owners.alive(pid, st.mtimeMs, name)) dead.add(name.slice(0, name.lastIndexOf('.')));
  }
  let adopted = false;
  for (const stem of [...dead].sort()) {
    const theirs = join(dir, stem);
    if (!adopted && names.includes(`${stem}${MIRROR_SUFFIX}`) && names.includes(`${stem}${STATE_SUFFIX}`)) {
      adopted = await adopt(theirs, m);
    }
    for (const suffix of [MIRROR_SUFFIX, STATE_SUFFIX, STATE_TMP_SUFFIX])
      await fsp.unlink(`${theirs}${suffix}`).catch(() => {});
  }
}

/** Claims the dead owner's mirror at `theirs` (renaming it is the claim); false when its state does not fit it. */
async function adopt(theirs: string, m: Mirror): Promise<boolean> {
  try {
    await fsp.rename(`${theirs}${MIRROR_SUFFIX}`, m.path);
  } catch {
    // Another process claimed it first, or it is gone.
    return false;
  }
  const state = parseState(await readStateFile(`${theirs}${STATE_SUFFIX}`));
  // lstat: a symlink is not adopted (appending would write through it, into the file it names).
  const st = await fsp.lstat(m.path, { bigint: true }).catch(() => undefined);
  if (!state || !st?.isFile() || st.size < BigInt(state.end)) {
    await fsp.unlink(m.path).catch(() => {});
    return false;
  }
  m.ino = st.ino;
  m.end = state.end;
  m.last = { seq: state.seq, etag: state.etag };
  m.modifiedAt = new Date(state.modifiedAt);
  // Ours now: its state is rewritten under our name with the next sync that adds a batch.
  await writeState(m);
  return true;
}
