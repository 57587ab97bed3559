/**
 * A search pass kept between pages (store/search.ts). Following a search
 * page by page (each page's `nextOffset` as the next `offset`) would
 * otherwise open the blob, find the line's byte in the index and start
 * reading again for every page, and throw away the reads already under
 * way: about 2 ms a page, a fifth of a 1 GiB literal search in pages of 100
 * matches (docs/benchmarks.md, "Reads and search"). A pass that stopped at
 * its page's match limit is parked here with its reads, and the page that
 * asks for the same search from exactly that line takes it and goes on.
 * One pass per store is kept, for {@link PARK_MS} at most.
 */
import type { IndexCursor } from './index-cursor.js';
import type { VerifiedBlob } from './integrity.js';
import type { ChunkEntry } from './search-chunk.js';
import type { ReadAhead, ReadChunk } from './search-reader.js';

/** How long an untaken pass keeps its blob open and its reads. */
const PARK_MS = 2000;

/** Where a stopped pass goes on: inside the read it was searching. */
export interface ResumePoint {
  /** The read being searched. */
  readonly chunk: ReadChunk;
  /** Start of the next line to search, a position in `chunk.buf`. */
  readonly at: number;
  /** That line's number (the page's `nextOffset`). */
  readonly line: number;
  /** Index entries of the read at or after `at` (positions in `chunk.buf`). */
  readonly entries: readonly ChunkEntry[];
  /** Whether the pass numbered lines from the index (checked against the blob's count at its end). */
  readonly indexed: boolean;
}

/** What a pass holds: the blob, its reads and its index cursor. */
export interface PassResources {
  readonly blob: VerifiedBlob;
  readonly reader: ReadAhead;
  readonly index: IndexCursor | undefined;
}

interface Parked extends PassResources {
  readonly key: string;
  readonly resume: ResumePoint;
  readonly timer: NodeJS.Timeout;
}

const parked = new WeakMap<object, Parked>();

/** Closes a pass's reads (waiting for those under way), its index and its blob; never throws. */
export async function closePass(p: PassResources): Promise<void> {
  await p.reader.close().catch(() => {});
  await p.index?.close();
  await p.blob.close().catch(() => {});
}

function drop(p: Parked): void {
  clearTimeout(p.timer);
  void closePass(p);
}

/** Parks a stopped pass of `store` under `key`, closing the one parked before. */
export function park(store: object, key: string, pass: PassResources, resume: ResumePoint): void {
  const old = parked.get(store);
  if (old !== undefined) drop(old);
  const timer = setTimeout(() => {
    if (parked.get(store)?.timer === timer) parked.delete(store);
    void closePass(pass);
  }, PARK_MS);
  timer.unref();
  parked.set(store, { ...pass, key, resume, timer });
}

/**
 * The pass parked for `key` at line `line`, now the caller's (to close or
 * park again); undefined when there is none. Another search of the store
 * leaves the parked one where it is.
 */
export function takeParked(
  store: object,
  key: string,
  line: number,
): (PassResources & { resume: ResumePoint }) | undefined {
  const p = parked.get(store);
  if (p === undefined || p.key !== key || p.resume.line !== line) return undefined;
  parked.delete(store);
  clearTimeout(p.timer);
  return p;
}

/** Closes the pass parked for `store`, if any (a store being closed). */
export async function closeParked(store: object): Promise<void> {
  const p = parked.get(store);
  if (p === undefined) return;
  parked.delete(store);
  clearTimeout(p.timer);
  await closePass(p);
}
