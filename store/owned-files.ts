/**
 * The two reads every pass over the store's owned files makes (GC's pins,
 * tmp/ and trash, the orphan reaper's journals), through {@link StoreIO} so
 * that fault injection reaches them like every other store operation.
 */
import { constants } from 'node:fs';
import { toSluiceError } from '../engine/protocol/errors.js';
import type { StoreIO } from './io.js';

/** Entries of `dir`, or none when it does not exist; any other failure is EDISK. */
export async function readdirOrEmpty(io: StoreIO, dir: string): Promise<string[]> {
  try {
    return await io.readdir(dir);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return [];
    throw toSluiceError(err, 'EDISK');
  }
}

/**
 * The text (latin1) and mtime of the file at `path`, or undefined when it is
 * not a regular file. Opened without blocking, so a FIFO planted in its place
 * cannot hold a thread; errors (ENOENT included) are the caller's.
 */
export async function readRegularFile(
  io: StoreIO,
  path: string,
): Promise<{ text: string; mtimeMs: number } | undefined> {
  const fh = await io.open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  try {
    const st = await fh.stat();
    if (!st.isFile()) return undefined;
    return { text: (await fh.readFile()).toString('latin1'), mtimeMs: st.mtimeMs };
  } finally {
    await fh.close();
  }
}
