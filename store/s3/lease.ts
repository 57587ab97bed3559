/**
 * Pins of an S3 store: a lease object `<prefix>/leases/<owned name>` this
 * store renews; an add resolves once a lease naming it is stored. Every
 * write but the first is a compare-and-swap on the previous ETag, so a
 * collector reclaiming an expired lease fences this store: its pins fail
 * with EDISK (`LeaseLost`), later ones get a new key. The argument rests on
 * the order of writes, not clocks (docs/operations.md, "GC across hosts").
 */
import { BadOptionError, ClosedError, DiskError, toSluiceError } from '../../engine/protocol/errors.js';
import { ownedName } from '../owners.js';
import type { Pin } from '../pins.js';
import { writeNonce } from './expiry.js';
import type { S3Objects } from './objects.js';

/** How long a lease protects its digests after its last write: two minutes. */
const DEFAULT_LEASE_TTL_MS = 120_000;

/** The first line of a live lease. */
export const LEASE_MAGIC = 'sluice-lease 1';
/** The whole body a collector writes over a lease it reclaimed. */
export const LEASE_RECLAIMED = 'sluice-lease reclaimed\n';

/** Lease timing of one store. */
export interface LeaseTiming {
  /** Digests stay protected this long after the lease's last write (server clock). */
  readonly ttlMs: number;
  /** The lease is rewritten this often while it holds digests. */
  readonly renewMs: number;
}

/** The error of a pin whose lease was reclaimed while this store stalled. */
function leaseLostError(key: string): DiskError {
  return new DiskError(
    `the S3 lease ${key} expired and was reclaimed: what it pinned may have been collected, so it is not referenced`,
    { s3: 'LeaseLost', key },
  );
}

/** One pin of the journal. */
interface LeasePin {
  /** Digests whose add resolved (stored in a lease), and digests appended to this store's packs. */
  readonly own: string[];
  /** Sequence numbers of this store's packs holding its packed blobs (covered by the lease's range). */
  readonly packs: number[];
  /** Packed publishes whose upload waits for {@link Pin.vouch}: each kick starts it, the promise settles with it. */
  readonly deferred: Array<{ kick: () => void; done: Promise<unknown> }>;
  released: boolean;
  /** The lease that held its digests was reclaimed. */
  lost: string | undefined;
}

/** Pack sequence numbers a lease covers beyond the next one, so most pack uploads need no lease write. */
const PACK_HEADROOM = 64;

/** The line of a lease naming the packs it pins: `packs <owner> <low> <high>`, sequence numbers low..high-1. */
export const LEASE_PACKS = /^packs ([0-9a-z-]+) ([0-9]+) ([0-9]+)$/;

interface QueuedAdd {
  pin: LeasePin;
  digests: readonly string[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** The lease of one S3 store (see the module comment). */
export class LeaseJournal {
  private key: string | undefined;
  private etag: string | undefined;
  private seq = 0;
  private readonly pins = new Set<LeasePin>();
  private queue: QueuedAdd[] = [];
  private waiters: Array<() => void> = [];
  private flushing: Promise<void> | undefined;
  private renewWanted = false;
  private storedAt = Number.NEGATIVE_INFINITY;
  /** The digests the stored lease names (an empty one after a non-empty one is worth one more write). */
  private stored = new Set<string>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private closed = false;
  /** The owner part of this store's pack keys, and its next unused sequence number. */
  private packOwner: { name: string; next: () => number } | undefined;
  /** Pack sequence numbers held (by pins, or by an upload in flight), with their counts. */
  private readonly packHolds = new Map<number, number>();
  /** The pack range of the stored lease: [low, high). */
  private storedPacks: { low: number; high: number } | undefined;
  private readonly states = new WeakMap<Pin, LeasePin>();

  constructor(
    private readonly objects: S3Objects,
    private readonly base: string,
    /** TTL and renewal interval. */
    readonly timing: LeaseTiming,
  ) {}

  /** The key of the current lease, once written. */
  get currentKey(): string | undefined {
    return this.key;
  }

  /** A new pin holding `digests` (resolves once a lease naming them is stored). */
  async pin(digests: readonly string[]): Promise<Pin> {
    const state: LeasePin = { own: [], packs: [], deferred: [], released: false, lost: undefined };
    this.pins.add(state);
    try {
      await this.hold(state, digests);
    } catch (err) {
      this.release(state);
      throw err;
    }
    let adding: Promise<unknown> = Promise.resolve();
    const pin: Pin = {
      get digests() {
        return state.own;
      },
      add: (more) => {
        if (state.released) return Promise.reject(new Error('pin already released'));
        const added = this.hold(state, more);
        adding = Promise.all([adding, added.catch(() => {})]);
        return added;
      },
      release: async () => {
        if (state.released) return;
        await adding;
        // A deferred upload never vouched for (its call failed first) still goes: it is in a batch.
        for (const d of state.deferred.splice(0)) d.kick();
        this.release(state);
      },
      vouch: () => this.vouch(state),
    };
    this.states.set(pin, state);
    return pin;
  }

  /**
   * Makes this lease pin the packs `owner` uploads (store/s3/packs.ts): every
   * lease written from now on names a range of their sequence numbers, from
   * the lowest one held to {@link PACK_HEADROOM} past `next()`.
   */
  usePacks(owner: string, next: () => number): void {
    this.packOwner = { name: owner, next };
  }

  /** Holds pack `seq` (an upload in flight) until {@link unholdPack}. */
  holdPack(seq: number): void {
    this.packHolds.set(seq, (this.packHolds.get(seq) ?? 0) + 1);
  }

  /** Ends one {@link holdPack} of `seq`; the next lease write may leave it out. */
  unholdPack(seq: number): void {
    const n = (this.packHolds.get(seq) ?? 0) - 1;
    if (n > 0) this.packHolds.set(seq, n);
    else this.packHolds.delete(seq);
  }

  /** `pin` (one of this journal's) holds `digest`, packed in pack `seq`, until it is released. */
  holdPacked(pin: Pin, digest: string, seq: number): void {
    const state = this.states.get(pin);
    if (!state || state.released) return;
    state.own.push(digest);
    state.packs.push(seq);
    this.holdPack(seq);
  }

  /** The upload of a packed publish of `pin` waits for its vouch (or release): `kick` starts it. */
  defer(pin: Pin, kick: () => void, done: Promise<unknown>): boolean {
    const state = this.states.get(pin);
    if (!state || state.released) return false;
    state.deferred.push({ kick, done });
    return true;
  }

  /**
   * Resolves once a stored lease, fresh enough that no collection can have
   * taken it for expired, covers pack `seq`: only then may the pack be
   * uploaded (docs/operations.md, "GC across hosts"). One lease write per
   * {@link PACK_HEADROOM} packs, or none.
   * @throws EDISK (`LeaseLost` when reclaimed) when no lease could be stored.
   */
  async coverPack(seq: number): Promise<void> {
    for (let attempt = 0; attempt < 2; attempt++) {
      if (this.covers(seq)) return;
      await this.renew();
    }
    if (this.covers(seq)) return;
    throw new DiskError(`no S3 lease covering pack ${seq} of this store could be stored`, {
      s3: 'LeaseLost',
      key: this.key ?? '',
    });
  }

  private covers(seq: number): boolean {
    const r = this.storedPacks;
    return this.etag !== undefined && this.fresh() && r !== undefined && r.low <= seq && seq < r.high;
  }

  private hold(pin: LeasePin, digests: readonly string[]): Promise<void> {
    if (this.closed) return Promise.reject(new ClosedError('the store is closed'));
    if (pin.lost) return Promise.reject(leaseLostError(pin.lost));
    if (digests.length === 0) return Promise.resolve();
    // Named by the stored lease, too recently to have expired, no write in flight: held without a PUT.
    if (!this.flushing && this.fresh() && digests.every((d) => this.stored.has(d))) {
      pin.own.push(...digests);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ pin, digests, resolve, reject });
      this.kick();
    });
  }

  /** Lazy: the next write leaves the pin's digests out. */
  private release(pin: LeasePin): void {
    pin.released = true;
    this.pins.delete(pin);
    for (const seq of pin.packs.splice(0)) this.unholdPack(seq);
  }

  // Rejects (LeaseLost) when the lease was reclaimed.
  private async vouch(pin: LeasePin): Promise<void> {
    const deferred = pin.deferred.splice(0);
    for (const d of deferred) d.kick();
    // A failed upload fails the vouch: what it held is not in the bucket.
    for (const d of deferred) await d.done;
    if (pin.lost) throw leaseLostError(pin.lost);
    if (pin.own.length === 0 && pin.packs.length === 0) return;
    if (this.fresh()) return;
    await this.renew();
    if (pin.lost) throw leaseLostError(pin.lost);
  }

  /** A collector waits a whole TTL of server time, so half a TTL here is safe unless clock rates differ 2×. */
  private fresh(): boolean {
    return performance.now() - this.storedAt < this.timing.ttlMs / 2;
  }

  /** Writes the lease now (a renewal), whatever the timer says. */
  renew(): Promise<void> {
    return new Promise((resolve) => {
      this.renewWanted = true;
      this.waiters.push(resolve);
      this.kick();
    });
  }

  private kick(): void {
    this.flushing ??= this.flush().finally(() => {
      this.flushing = undefined;
      if (this.queue.length > 0 || this.renewWanted) this.kick();
    });
    if (!this.timer && !this.closed) {
      this.timer = setInterval(() => this.tick(), this.timing.renewMs);
      this.timer.unref();
    }
  }

  private tick(): void {
    if (this.closed) return;
    const holds = [...this.pins].some((p) => (p.own.length > 0 || p.packs.length > 0) && !p.lost);
    // Holding nothing: one write that says so (lazy releases end here), then no renewals.
    if (holds || this.stored.size > 0) {
      this.renewWanted = true;
      this.kick();
    }
  }

  private body(extra: readonly QueuedAdd[]): {
    text: string;
    digests: Set<string>;
    packs: { low: number; high: number } | undefined;
  } {
    const all = new Set<string>();
    for (const p of this.pins) if (!p.lost && !p.released) for (const d of p.own) all.add(d);
    for (const q of extra) if (!q.pin.lost) for (const d of q.digests) all.add(d);
    this.seq++;
    const header = `${LEASE_MAGIC}\nowner ${this.key}\nseq ${this.seq}\nttl ${this.timing.ttlMs}\nnonce ${writeNonce()}\n\n`;
    let packs: { low: number; high: number } | undefined;
    let line = '';
    if (this.packOwner) {
      // Never narrower than the stored range above: a sequence number it covers may be uploading now.
      const next = this.packOwner.next();
      const low = Math.min(next, ...this.packHolds.keys());
      packs = { low, high: Math.max(this.storedPacks?.high ?? 0, next + PACK_HEADROOM) };
      line = `packs ${this.packOwner.name} ${packs.low} ${packs.high}\n`;
    }
    return { text: header + line + [...all].map((d) => `${d}\n`).join(''), digests: all, packs };
  }

  private async flush(): Promise<void> {
    const batch = this.queue;
    this.queue = [];
    const waiters = this.waiters;
    this.waiters = [];
    this.renewWanted = false;
    let failure: unknown;
    try {
      // At most two tries: the second under a new key.
      for (let attempt = 0; attempt < 2; attempt++) {
        this.key ??= `${this.base}leases/${ownedName(16)}`;
        const { text, digests, packs } = this.body(batch);
        const started = performance.now();
        const bytes = Buffer.from(text, 'latin1');
        const etag =
          this.etag === undefined
            ? await this.objects.putIfAbsent(this.key, bytes)
            : await this.objects.putIfMatch(this.key, bytes, this.etag);
        if (etag !== undefined) {
          this.etag = etag;
          this.storedAt = started;
          this.stored = digests;
          this.storedPacks = packs;
          break;
        }
        this.fence();
      }
    } catch (err) {
      failure = toSluiceError(err, 'EDISK');
    }
    for (const q of batch) {
      if (q.pin.lost) q.reject(leaseLostError(q.pin.lost));
      else if (failure !== undefined || this.etag === undefined) q.reject(failure ?? leaseLostError(String(this.key)));
      else {
        q.pin.own.push(...q.digests);
        q.resolve();
      }
    }
    for (const w of waiters) w();
  }

  /** The lease was reclaimed: every pin that held digests under it is lost; the next write starts a new lease. */
  private fence(): void {
    const key = String(this.key);
    for (const p of this.pins) if (p.own.length > 0 || p.packs.length > 0) p.lost = key;
    this.key = undefined;
    this.etag = undefined;
    this.stored = new Set();
    this.storedPacks = undefined;
    this.storedAt = Number.NEGATIVE_INFINITY;
  }

  /** Nothing is held in memory only: an S3 pack is uploaded under a lease covering it (store/pins.ts, {@link Pin.holdInOwnPack}). */
  async flushInMemory(): Promise<void> {}

  /** A lease with pins still held is left to expire, as a closed store's local pin file is left for GC. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    while (this.flushing) await this.flushing;
    const holds = [...this.pins].some((p) => (p.own.length > 0 || p.packs.length > 0) && !p.lost);
    if (!holds && this.key !== undefined) {
      const key = this.key;
      this.key = undefined;
      await this.objects.delete(key).catch(() => {});
    }
  }
}

/** The lease timing options of an S3 store ({@link leaseTiming}). */
export interface LeaseOptions {
  /** @default `$SLUICE_S3_LEASE_TTL_MS`, else {@link DEFAULT_LEASE_TTL_MS} */
  readonly ttlMs?: number;
  /** @default `$SLUICE_S3_LEASE_RENEW_MS`, else a quarter of the TTL */
  readonly renewMs?: number;
}

function fromEnv(name: string, env: NodeJS.ProcessEnv): number | undefined {
  const v = env[name];
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0)
    throw new BadOptionError(`${name} must be a positive integer, got ${JSON.stringify(v)}`);
  return n;
}

/**
 * Options, else the environment, else defaults; renewal under half the TTL.
 * @throws EBADOPTION for a non-positive value or a renewal of half the TTL or more.
 */
export function leaseTiming(options: LeaseOptions = {}, env: NodeJS.ProcessEnv = process.env): LeaseTiming {
  const ttlMs = options.ttlMs ?? fromEnv('SLUICE_S3_LEASE_TTL_MS', env) ?? DEFAULT_LEASE_TTL_MS;
  const renewMs = options.renewMs ?? fromEnv('SLUICE_S3_LEASE_RENEW_MS', env) ?? Math.max(1, Math.floor(ttlMs / 4));
  if (!Number.isInteger(ttlMs) || ttlMs <= 0 || !Number.isInteger(renewMs) || renewMs <= 0 || renewMs * 2 >= ttlMs) {
    throw new BadOptionError(
      `lease timing must be positive integers with renewMs under half of ttlMs, got ttlMs ${JSON.stringify(ttlMs)} and renewMs ${JSON.stringify(renewMs)}`,
    );
  }
  return { ttlMs, renewMs };
}
