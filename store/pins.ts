/**
 * Pins: GC roots held by a live process, like Nix's temporary roots. An
 * open Store keeps a journal `pins/<pid>-<random>.pin` of `+<digest>` /
 * `-<digest>` lines, cut to zero length rather than removed while open
 * (docs/benchmarks.md, "Inode churn"). No fsync: a pin matters only while
 * its owner lives, and a crash makes the owner dead.
 */
import { constants } from 'node:fs';
import { ClosedError, toSluiceError } from '../engine/protocol/errors.js';
import type { StoreFile } from './file.js';
import { type StoreIO, writeAll } from './io.js';
import { ownedName } from './owners.js';

/** A GC root held by this process until released. */
export interface Pin {
  /** The digests this pin protects. */
  readonly digests: readonly string[];
  /** Protects more digests (before they are placed in the store). */
  add(digests: readonly string[]): Promise<void>;
  /**
   * Holds a copy in our own unsealed pack in memory only: no collection
   * rewrites it while we live, and the holds reach the journal before it is
   * sealed ({@link PinJournal.flushInMemory}). Throws once released.
   */
  holdInOwnPack?(digests: readonly string[]): void;
  /** Releases the pin (idempotent). */
  release(): Promise<void>;
  /** Resolves while the holds are protected; EDISK (`LeaseLost`) when an S3 lease was reclaimed. */
  vouch(): Promise<void>;
}

/** Rewrite the journal once it has this many lines and most of them are dead. */
const COMPACT_LINES = 4096;

/** Every line this journal writes: a sign, a 64-hex digest and a newline. */
const LINE_CHARS = 66;

const APPEND_FLAGS = constants.O_CREAT | constants.O_WRONLY | constants.O_APPEND;

/** Parses pin-file text into held digests (count > 0). */
export function parsePinJournal(text: string): Set<string> {
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    let sign = 1;
    let d = line;
    if (line.startsWith('+')) d = line.slice(1);
    else if (line.startsWith('-')) {
      sign = -1;
      d = line.slice(1);
    }
    if (!/^[0-9a-f]{64}$/.test(d)) continue;
    counts.set(d, (counts.get(d) ?? 0) + sign);
  }
  const held = new Set<string>();
  for (const [d, n] of counts) if (n > 0) held.add(d);
  return held;
}

/** A hold (add) or a pin's release, waiting for the journal's next write. */
interface JournalOp {
  add: boolean;
  digests: readonly string[];
  /** The pin's own list, extended once an add is written. */
  own: string[] | undefined;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** The pin journal of one Store instance. */
export class PinJournal {
  private readonly dir: string;
  private readonly io: StoreIO;
  private readonly held = new Map<string, number>();
  private fh: StoreFile | undefined;
  private path: string | undefined;
  private lines = 0;
  /** The file may hold lines (a write was attempted since it was last cut), whether or not it is open. */
  private dirty = false;
  /** The last append failed: the file may end in part of a line (the next append starts a new one). */
  private torn = false;
  private closed = false;
  private pins = 0;
  private ops: JournalOp[] = [];
  private flushing: Promise<void> | undefined;
  /** Pins holding digests in memory only ({@link Pin.holdInOwnPack}), each with its journal write-out. */
  private readonly inMemory = new Map<object, () => Promise<void>>();

  constructor(dir: string, io: StoreIO) {
    this.dir = dir;
    this.io = io;
  }

  /** A new pin holding `digests`. */
  async pin(digests: readonly string[]): Promise<Pin> {
    const own: string[] = [];
    this.pins++;
    try {
      await this.hold(digests, own);
    } catch (err) {
      await this.release(own);
      throw err;
    }
    let released = false;
    // A release waits for adds in flight, or in one batch it would drop before the add counts (pinned for good).
    let adding: Promise<unknown> = Promise.resolve();
    const add = (more: readonly string[]) => {
      const added = this.hold(more, own);
      adding = Promise.all([adding, added.catch(() => {})]);
      return added;
    };
    /** Held in memory only, not yet in the journal. */
    const lazy: string[] = [];
    const key = {};
    const writeOut = async () => {
      const ds = lazy.splice(0);
      this.inMemory.delete(key);
      try {
        await add(ds);
      } catch (err) {
        // Still held in memory: the next seal tries again (and does not seal until it succeeds).
        if (!released) {
          lazy.push(...ds);
          this.inMemory.set(key, writeOut);
        }
        throw err;
      }
    };
    return {
      get digests() {
        return [...own, ...lazy];
      },
      add: (more) => {
        if (released) return Promise.reject(new Error('pin already released'));
        return add(more);
      },
      holdInOwnPack: (more) => {
        if (released) throw new Error('pin already released');
        if (this.closed) throw new ClosedError('the store is closed');
        if (more.length === 0) return;
        lazy.push(...more);
        this.inMemory.set(key, writeOut);
      },
      release: async () => {
        if (released) return;
        released = true;
        // What was only in memory is dropped with no journal line: no reader ever saw it.
        lazy.length = 0;
        this.inMemory.delete(key);
        await adding;
        await this.release(own);
      },
      vouch: () => Promise.resolve(),
    };
  }

  /**
   * Awaited before a seal, so a collection that sees the seal sees these
   * holds; on failure they stay in memory and the pack stays unsealed.
   */
  async flushInMemory(): Promise<void> {
    const outs = [...this.inMemory.values()];
    if (outs.length === 0) return;
    const results = await Promise.allSettled(outs.map((w) => w()));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  private hold(digests: readonly string[], own: string[]): Promise<void> {
    if (this.closed) return Promise.reject(new ClosedError('the store is closed'));
    if (digests.length === 0) return Promise.resolve();
    return this.enqueue({ add: true, digests, own });
  }

  /** Ends a pin: drops its digests, and it stops counting as alive. */
  private release(digests: readonly string[]): Promise<void> {
    return this.enqueue({ add: false, digests, own: undefined });
  }

  private enqueue(op: Omit<JournalOp, 'resolve' | 'reject'>): Promise<void> {
    return new Promise((resolve, reject) => {
      this.ops.push({ ...op, resolve, reject });
      this.flushing ??= this.flush();
    });
  }

  // Group commit: what is queued during a write goes out in the next single write, in order.
  private async flush(): Promise<void> {
    // Never synchronous: an empty batch would clear `flushing` before enqueue's `??=` stores this
    // promise, leaving a settled promise no later op gets past.
    await null;
    while (this.ops.length > 0) {
      const batch = this.ops;
      this.ops = [];
      let text = '';
      let adds = false;
      for (const op of batch) {
        if (op.add) {
          adds = true;
          for (const d of op.digests) text += `+${d}\n`;
          continue;
        }
        // A drop takes effect in memory at once; its line only keeps a dead hold from looking live.
        this.pins--;
        for (const d of op.digests) {
          text += `-${d}\n`;
          const n = (this.held.get(d) ?? 0) - 1;
          if (n > 0) this.held.set(d, n);
          else this.held.delete(d);
        }
      }
      let failure: unknown;
      try {
        if (!adds && this.pins === 0 && this.held.size === 0) await this.empty(text);
        // Once closed, drops are not written (the descriptor is closed; the last release removes the file).
        else if (text.length > 0 && (adds || !this.closed)) await this.append(text);
      } catch (err) {
        failure = toSluiceError(err, 'EDISK');
      }
      for (const op of batch) {
        if (!op.add) {
          // A drop that cannot be written only keeps a digest alive until this process ends.
          op.resolve();
        } else if (failure !== undefined) {
          op.reject(failure);
        } else {
          op.own?.push(...op.digests);
          for (const d of op.digests) this.held.set(d, (this.held.get(d) ?? 0) + 1);
          op.resolve();
        }
      }
      if (failure === undefined && this.lines >= COMPACT_LINES && this.lines > 4 * this.held.size) {
        await this.compact().catch(() => {});
      }
    }
    this.flushing = undefined;
  }

  private async open(): Promise<StoreFile> {
    if (this.fh) return this.fh;
    this.path ??= `${this.dir}/${ownedName(16)}.pin`;
    this.fh = await this.io.open(this.path, APPEND_FLAGS, 0o600);
    return this.fh;
  }

  private async append(text: string): Promise<void> {
    const fh = await this.open();
    this.dirty = true;
    // A failed write may have left a line without its newline: ours would glue onto it, unseen.
    const out = this.torn ? `\n${text}` : text;
    this.torn = true;
    // O_APPEND, no position: every write lands at the end.
    await writeAll(this.io, fh, Buffer.from(out, 'latin1'), null);
    this.torn = false;
    this.lines += text.length / LINE_CHARS;
  }

  /** Rewrites the journal with only what is held (atomically: a reader sees the old or the new file). */
  private async compact(): Promise<void> {
    const path = this.path as string;
    const tmp = `${path}.tmp`;
    const text = [...this.held].map(([d, n]) => `+${d}\n`.repeat(n)).join('');
    const fh = await this.io.open(tmp, constants.O_CREAT | constants.O_TRUNC | constants.O_WRONLY, 0o600);
    try {
      await writeAll(this.io, fh, Buffer.from(text, 'latin1'), 0);
    } finally {
      await fh.close();
    }
    await this.io.rename(tmp, path);
    await this.fh?.close().catch(() => {});
    this.fh = undefined;
    this.lines = text.length / LINE_CHARS;
    this.dirty = this.lines > 0;
    this.torn = false;
  }

  // After the store closed, the empty file goes.
  private async empty(drops: string): Promise<void> {
    if (this.closed) {
      await this.remove();
      return;
    }
    if (!this.dirty) return;
    try {
      // Reopened after a compaction (which replaced the file and closed the old descriptor).
      await this.io.truncate(await this.open(), 0);
      this.lines = 0;
      this.dirty = false;
      this.torn = false;
    } catch {
      // Cannot cut: the drops still make the journal say that nothing is held.
      if (drops.length > 0) await this.append(drops);
    }
  }

  private async remove(): Promise<void> {
    const fh = this.fh;
    const path = this.path;
    this.fh = undefined;
    this.path = undefined;
    this.lines = 0;
    this.dirty = false;
    this.torn = false;
    await fh?.close().catch(() => {});
    if (path) await this.io.unlink(path).catch(() => {});
  }

  /** Removed when nothing is held, else left for GC to reclaim once this process ends. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.flushing) await this.flushing;
    if (this.held.size === 0) {
      await this.remove();
      return;
    }
    // Held pins remove the file once nothing is held.
    await this.fh?.close().catch(() => {});
    this.fh = undefined;
  }
}
