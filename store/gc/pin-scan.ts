/**
 * The pins as a collection reads them: the digests in pin files of live
 * owners are roots; pin files of dead owners protect nothing and are
 * reported for reclaiming. Reading fails (and so does the collection)
 * rather than under-reporting roots when a pin cannot be read.
 */
import { join } from 'node:path';
import { toSluiceError } from '../../engine/protocol/errors.js';
import { readdirOrEmpty, readRegularFile } from '../owned-files.js';
import { type OwnerCheck, ownerPid } from '../owners.js';
import { parsePinJournal } from '../pins.js';
import type { Store } from '../store.js';

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
  for (const name of await readdirOrEmpty(store.io, store.layout.pins)) {
    const path = join(store.layout.pins, name);
    let text: string;
    let mtimeMs: number;
    try {
      const read = await readRegularFile(store.io, path);
      // Not a regular file (a FIFO, a directory): not a pin this store wrote.
      if (!read) continue;
      ({ text, mtimeMs } = read);
    } catch (err) {
      // Released while we looked: it protects nothing any more.
      if ((err as { code?: unknown }).code === 'ENOENT') continue;
      throw toSluiceError(err, 'EDISK');
    }
    const pid = ownerPid(name);
    if (pid !== undefined && !owners.alive(pid, mtimeMs, name)) {
      scan.dead.push(path);
      continue;
    }
    scan.live++;
    for (const d of parsePinJournal(text)) scan.digests.add(d);
  }
  return scan;
}
