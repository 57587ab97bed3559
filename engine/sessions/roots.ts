/**
 * GC roots: what must survive a collection whatever its age.
 *
 * - Session roots: every blob referenced by a live (not reverted) call of an
 *   existing session: its output blob, or its manifest and stream blobs, and
 *   its spill blobs (large arguments or fields). Digests that appear in a
 *   corrupt log line are kept too, since the line cannot be trusted to say
 *   they are unreferenced.
 * - Pins: the digests in pin files of live owners. Pins of dead owners are
 *   not roots; they are reported for reclaiming.
 *
 * Reading fails (and so does the collection) rather than under-reporting
 * roots when a log or pin cannot be read.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { parsePinJournal } from '../../store/pins.js';
import type { Store } from '../../store/store.js';
import { toSluiceError } from '../protocol/errors.js';
import { foldReferences, listSessionIds } from './catalog.js';
import { type OwnerCheck, ownerPid } from './owners.js';
import { callReferences } from './state.js';

/** What the pins say. */
export interface PinScan {
  /** Digests held by live owners (and by pin files whose owner cannot be told). */
  digests: Set<string>;
  /** Pin files of live owners. */
  live: number;
  /** Paths of pin files whose owner is dead. */
  dead: string[];
}

/** Reads every pin file. */
export async function scanPins(store: Store, owners: OwnerCheck): Promise<PinScan> {
  const scan: PinScan = { digests: new Set(), live: 0, dead: [] };
  for (const name of await readdirOrEmpty(store.layout.pins)) {
    const path = join(store.layout.pins, name);
    let text: string;
    let mtimeMs: number;
    try {
      const st = await fsp.stat(path);
      if (!st.isFile()) continue;
      mtimeMs = st.mtimeMs;
      text = await fsp.readFile(path, 'latin1');
    } catch (err) {
      // Released while we looked: it protects nothing any more.
      if ((err as { code?: unknown }).code === 'ENOENT') continue;
      throw toSluiceError(err, 'EDISK');
    }
    const pid = ownerPid(name);
    if (pid !== undefined && !owners.alive(pid, mtimeMs)) {
      scan.dead.push(path);
      continue;
    }
    scan.live++;
    for (const d of parsePinJournal(text)) scan.digests.add(d);
  }
  return scan;
}

/** What the session logs say. */
export interface SessionRoots {
  /** Digests referenced by live calls (and mentioned by corrupt lines). */
  digests: Set<string>;
  /** Sessions read. */
  sessions: number;
  /** Live calls whose references were taken. */
  liveCalls: number;
}

/** Reads every session log and collects the references of its live calls. */
export async function scanSessions(store: Store): Promise<SessionRoots> {
  const roots: SessionRoots = { digests: new Set(), sessions: 0, liveCalls: 0 };
  for (const id of await listSessionIds(store)) {
    const folded = await foldReferences(store, id);
    // Deleted since the listing: no longer roots.
    if (!folded) continue;
    roots.sessions++;
    for (const d of folded.log.corruptDigests) roots.digests.add(d);
    for (const call of folded.state.live) {
      roots.liveCalls++;
      for (const d of callReferences(call).keys()) roots.digests.add(d);
    }
  }
  return roots;
}

/** Entries of `dir`, or none when it does not exist. */
export async function readdirOrEmpty(dir: string): Promise<string[]> {
  try {
    return await fsp.readdir(dir);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return [];
    throw toSluiceError(err, 'EDISK');
  }
}
