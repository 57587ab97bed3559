/**
 * What one open store has hashed and found intact (store/integrity.ts), so
 * a blob is hashed once per store instance, not once per read. Keyed by the
 * digest and the identity of the copy that was hashed: a copy modified or
 * replaced since no longer matches, and is hashed again.
 */

/** One blob this store verified. */
export interface Verified {
  /** The identity of the copy hashed (BlobHandle.identity). */
  key: string;
  /** Its lines by the shared line rule. */
  lines: number;
  /** Set when rebuilding the index failed since this verification (a read-only or full store). */
  indexUnavailable?: boolean;
}

/** Verified blobs remembered per store; the oldest are forgotten first (and simply hashed again). */
const MAX_REMEMBERED = 8192;

/** The verified blobs of one store, and the hashing passes in flight. */
export class VerifiedBlobs {
  private readonly entries = new Map<string, Verified>();
  /** Hashing passes running, by `<digest>@<key>`: concurrent first reads of one copy share one. */
  readonly inFlight = new Map<string, Promise<number>>();

  /** What was verified of `digest`, if it is still remembered. */
  get(digest: string): Verified | undefined {
    return this.entries.get(digest);
  }

  /** Remembers `v` as the verified copy of `digest`, as the newest entry. */
  remember(digest: string, v: Verified): void {
    this.entries.delete(digest);
    this.entries.set(digest, v);
    if (this.entries.size > MAX_REMEMBERED) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
  }

  /** True when `key` is the copy of `digest` remembered as verified. */
  holds(digest: string, key: string): boolean {
    return this.entries.get(digest)?.key === key;
  }
}
