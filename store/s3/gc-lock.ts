/**
 * The GC lock of an S3 store, across every host: `<prefix>/gc/lock` (id,
 * seq, ttl, nonce), taken create-once and renewed by compare-and-swap before
 * each batch of deletes, so a collector whose lock was taken over learns it
 * (412) before deleting more. An expired lock (server clock) is taken over
 * by a compare-and-swap on the very ETag judged expired, so two hosts never
 * both take it. Tombstones name the lock id that wrote them.
 */
import { TimeoutError } from '../../engine/protocol/errors.js';
import { ownedName } from '../owners.js';
import { expiredOnServer, parseHeader, writeNonce } from './expiry.js';
import type { S3Objects } from './objects.js';

/** Default TTL of the GC lock: two minutes (it is renewed before every batch of deletes). */
export const DEFAULT_GC_LOCK_TTL_MS = 120_000;

const MAGIC = 'sluice-gc-lock 1';
/** What a publisher writes over a lock it broke after it expired. */
const BROKEN = 'sluice-gc-lock broken\n';
const MAX_LOCK_BYTES = 4096;
const POLL_MS = 100;

/** What the lock object says now. */
export interface LockState {
  /** The holder's id, or undefined for a broken or unreadable lock. */
  readonly id: string | undefined;
  readonly etag: string;
  /** Past its TTL by the server's clock. */
  readonly expired: boolean;
}

/** Key of the GC lock under `base` (`<prefix>/` or ''). */
function gcLockKey(base: string): string {
  return `${base}gc/lock`;
}

/** Reads the lock: undefined when nobody holds it. */
export async function readGcLock(objects: S3Objects, base: string): Promise<LockState | undefined> {
  const got = await objects.getSmall(gcLockKey(base), MAX_LOCK_BYTES);
  if (!got) return undefined;
  const header = parseHeader(got.body.toString('latin1'));
  const ttl = Number(header.get('ttl'));
  const id = got.body.toString('latin1').startsWith(MAGIC) ? header.get('id') : undefined;
  return { id, etag: got.etag, expired: expiredOnServer(got.lastModified, got.serverDate, id ? ttl : 0) };
}

/** A stalled collector's next renewal then fails, so it deletes nothing more. True when the lock is gone or another's. */
export async function breakExpiredLock(objects: S3Objects, base: string, state: LockState): Promise<boolean> {
  if (!state.expired) return false;
  const key = gcLockKey(base);
  if ((await objects.putIfMatch(key, Buffer.from(BROKEN), state.etag)) !== undefined) await objects.delete(key);
  return true;
}

/** A held GC lock. */
export class S3GcLock {
  private seq = 0;

  private constructor(
    private readonly objects: S3Objects,
    private readonly key: string,
    /** This collection's id (tombstones carry it). */
    readonly id: string,
    private readonly ttlMs: number,
    private etag: string,
  ) {}

  private static body(id: string, seq: number, ttlMs: number): Buffer {
    return Buffer.from(`${MAGIC}\nid ${id}\nseq ${seq}\nttl ${ttlMs}\nnonce ${writeNonce()}\n`, 'latin1');
  }

  /** @throws ETIMEOUT when another collection holds it past `timeoutMs`; EDISK. */
  static async acquire(objects: S3Objects, base: string, ttlMs: number, timeoutMs: number): Promise<S3GcLock> {
    const key = gcLockKey(base);
    const id = ownedName(16);
    const started = performance.now();
    for (;;) {
      const created = await objects.putIfAbsent(key, S3GcLock.body(id, 0, ttlMs));
      if (created !== undefined) return new S3GcLock(objects, key, id, ttlMs, created);
      const held = await readGcLock(objects, base);
      if (held?.expired) {
        const taken = await objects.putIfMatch(key, S3GcLock.body(id, 0, ttlMs), held.etag);
        if (taken !== undefined) return new S3GcLock(objects, key, id, ttlMs, taken);
        continue;
      }
      if (held && performance.now() - started >= timeoutMs) {
        throw new TimeoutError(
          `another garbage collection (${held.id ?? 'unknown'}) holds s3 lock ${key}; try again when it has finished`,
          { holder: held.id ?? null },
        );
      }
      if (held) await new Promise((r) => setTimeout(r, POLL_MS));
    }
  }

  /** ETIMEOUT (`details.s3: 'LockLost'`) when taken over: this collection must delete nothing more. */
  async renew(): Promise<void> {
    const etag = await this.objects.putIfMatch(this.key, S3GcLock.body(this.id, ++this.seq, this.ttlMs), this.etag);
    if (etag === undefined) {
      throw new TimeoutError(`the GC lock ${this.key} expired and was taken over; this collection stopped`, {
        s3: 'LockLost',
        key: this.key,
      });
    }
    this.etag = etag;
  }

  /** Deletes the lock if it is still this one. */
  async release(): Promise<void> {
    const current = await this.objects.getSmall(this.key, MAX_LOCK_BYTES).catch(() => undefined);
    if (current && current.etag === this.etag) await this.objects.delete(this.key).catch(() => {});
  }
}
