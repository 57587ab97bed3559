/**
 * The leases as an S3 collection reads them (the S3 counterpart of
 * store/gc/pin-scan.ts): the digests of unexpired leases are roots; an
 * expired one (by the server's clock) is a dead owner's, reclaimed by a
 * compare-and-swap on the very version judged expired, so that its owner,
 * should it resume, finds out at its next write (store/s3/lease.ts). A lease
 * renewed between the read and the swap fails the swap and is read again as
 * live. A lease that cannot be read fails the scan (EDISK): it may hold roots.
 */
import { expiredOnServer, parseHeader } from './expiry.js';
import { LEASE_MAGIC, LEASE_PACKS, LEASE_RECLAIMED } from './lease.js';
import type { S3Objects } from './objects.js';

/** A lease of a million pinned digests is 65 MB; past this it is not a lease this store wrote. */
const MAX_LEASE_BYTES = 128 * 1024 * 1024;
const DIGEST = /^[0-9a-f]{64}$/;

/**
 * How a scan treats expired leases: `reclaim` them (a collection's first
 * read), `skip` them (a dry run: what a collection would do, changing
 * nothing), or `keep` their digests (the re-check: over-counting is safe).
 */
export type ExpiredLeases = 'reclaim' | 'skip' | 'keep';

/** What the leases say. */
export interface LeaseScan {
  /** Digests of the leases taken as live. */
  readonly digests: Set<string>;
  /** Pack ranges of those leases: owner → sequence numbers [low, high) (store/s3/packs.ts), every range kept. */
  readonly packs: Map<string, Array<{ low: number; high: number }>>;
  /** Leases taken as live. */
  live: number;
  /** Expired leases reclaimed (with `skip`: that would be), and reclaimed markers removed. */
  reclaimed: number;
}

/** Key prefix of the leases under `base`. */
function leasePrefix(base: string): string {
  return `${base}leases/`;
}

/** Reads every lease under `base` (see the module comment). */
export async function scanLeases(objects: S3Objects, base: string, expired: ExpiredLeases): Promise<LeaseScan> {
  const scan: LeaseScan = { digests: new Set(), packs: new Map(), live: 0, reclaimed: 0 };
  for await (const o of objects.list(leasePrefix(base))) {
    for (let attempt = 0; ; attempt++) {
      const got = await objects.getSmall(o.key, MAX_LEASE_BYTES);
      // Deleted since the listing: its owner closed holding nothing.
      if (!got) break;
      const text = got.body.toString('latin1');
      if (text === LEASE_RECLAIMED) {
        // A marker a collection died before removing: its owner can never write this key again.
        if (expired === 'reclaim') {
          await objects.delete(o.key);
          scan.reclaimed++;
        }
        break;
      }
      // Not a lease this store wrote: its digest lines are kept, whatever else it says.
      const ttl = text.startsWith(LEASE_MAGIC) ? Number(parseHeader(text).get('ttl')) : Number.POSITIVE_INFINITY;
      if (expiredOnServer(got.lastModified, got.serverDate, ttl) && expired !== 'keep' && attempt === 0) {
        if (expired === 'skip') {
          scan.reclaimed++;
          break;
        }
        if ((await objects.putIfMatch(o.key, Buffer.from(LEASE_RECLAIMED, 'latin1'), got.etag)) !== undefined) {
          await objects.delete(o.key);
          scan.reclaimed++;
          break;
        }
        // Renewed (or rewritten) since it was read: read it again, as live.
        continue;
      }
      scan.live++;
      for (const line of text.split('\n')) {
        if (DIGEST.test(line)) scan.digests.add(line);
        const m = LEASE_PACKS.exec(line);
        if (!m) continue;
        const ranges = scan.packs.get(m[1] as string) ?? [];
        ranges.push({ low: Number(m[2]), high: Number(m[3]) });
        scan.packs.set(m[1] as string, ranges);
      }
      break;
    }
  }
  return scan;
}

/** True when a lease of `scan` pins pack `seq` of `owner`. */
export function leasedPack(scan: LeaseScan, owner: string, seq: number): boolean {
  return (scan.packs.get(owner) ?? []).some((r) => r.low <= seq && seq < r.high);
}
