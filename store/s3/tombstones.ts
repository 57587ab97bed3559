/**
 * Tombstones of an S3 collection: S3 has no rename, so where the local
 * collector moves a candidate into its trash, the S3 collector writes a
 * marker beside it and leaves the blob where it is:
 *
 *     <prefix>/gc/tombstones/<digest>     body: the id of the GC lock that wrote it
 *
 * The two halves of the handshake (docs/operations.md, "GC across hosts"):
 *
 * - a collector PUTs the tombstone, THEN re-reads the leases and the roots,
 *   and deletes the blob only when neither names it, then the tombstone;
 * - a publisher adds the digest to its lease (stored), THEN looks for a
 *   tombstone ({@link settle}); when there is one it does not deduplicate
 *   onto the blob nor upload over it while that collection may still delete
 *   it: it waits until the tombstone is gone, or its collection's lock is
 *   gone, another's, or expired by the server's clock (it then breaks the
 *   lock, so the stalled collector deletes nothing more).
 *
 * With read-after-write consistency one of the two sees the other's write:
 * if the publisher saw no tombstone, its lease was stored before the
 * tombstone was, hence before the collector's re-read.
 */
import { breakExpiredLock, readGcLock } from './gc-lock.js';
import type { S3Objects } from './objects.js';

const MAX_TOMBSTONE_BYTES = 4096;
/** Polling of a tombstone a publisher waits on: from 50 ms, doubling, up to 1 s. */
const FIRST_POLL_MS = 50;
const MAX_POLL_MS = 1000;

/** Key prefix of the tombstones under `base`. */
export function tombstonePrefix(base: string): string {
  return `${base}gc/tombstones/`;
}

/** Key of the tombstone of `digest`. */
export function tombstoneKey(base: string, digest: string): string {
  return `${tombstonePrefix(base)}${digest}`;
}

/**
 * Waits until no collection may still delete blob `digest` (see the module
 * comment). Costs one HEAD when there is no tombstone, the common case.
 * The caller has stored `digest` in its lease before calling.
 */
export async function settle(objects: S3Objects, base: string, digest: string): Promise<void> {
  const key = tombstoneKey(base, digest);
  if (!(await objects.head(key))) return;
  let poll = FIRST_POLL_MS;
  for (;;) {
    const stone = await objects.getSmall(key, MAX_TOMBSTONE_BYTES);
    if (!stone) return;
    const owner = stone.body.toString('latin1').trim();
    const lock = await readGcLock(objects, base);
    // Its collection is over (released, or another holds the lock, which clears stale tombstones first).
    if (!lock || lock.id !== owner) return;
    if (await breakExpiredLock(objects, base, lock)) return;
    await new Promise((r) => setTimeout(r, poll));
    poll = Math.min(MAX_POLL_MS, poll * 2);
  }
}
