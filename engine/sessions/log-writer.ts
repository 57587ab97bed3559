/**
 * Appending to one session's event log, with group commit.
 *
 * Lines are appended with O_APPEND in the order `append` was called, one
 * write at a time: lines appended while a write is in flight go together in
 * the next. Writing and fsyncing are two queues, so a line is written while
 * an fsync of earlier lines is still in flight. A line that need not be
 * durable (`call.started`) resolves once its write is done: it reaches the
 * kernel without waiting for anyone's fsync, and its call is dispatched that
 * much sooner. A durable line resolves only after an fsync that began after
 * its write ended, and every durable line written meanwhile shares the next
 * fsync. So N completions at once cost about two writes and two fsyncs, not N.
 *
 * A failed fsync also fails every durable line whose write began before the
 * failure was reported, not only the lines it covered. Those bytes may have
 * been in the writeback that failed, and Linux reports a writeback error to
 * one fsync only, marking the pages clean: the next fsync would succeed
 * without writing them. A line written after the failure dirties its pages
 * again, so the next fsync does confirm it.
 *
 * A log whose last line was torn by a crash gets a newline before the first
 * new line, so the torn fragment stays one (skipped) line instead of
 * swallowing the next record.
 */
import { constants, promises as fsp } from 'node:fs';
import { dirname } from 'node:path';
import type { StoreFile } from '../../store/file.js';
import { makeDirs, type StoreIO, writeAll } from '../../store/io.js';
import type { Store } from '../../store/store.js';
import { IntegrityError, toSluiceError } from '../protocol/errors.js';
import { eventLogPath } from './session-id.js';

/** Counters of one writer, for tests and benchmarks. */
export interface LogWriterStats {
  /** Lines appended. */
  appends: number;
  /** fsyncs performed (on an S3 store: batch objects PUT, one per group commit). */
  syncs: number;
}

/** What the recorder appends through: a local log ({@link EventLogWriter}) or an S3 session (s3-log-writer.ts). */
export interface SessionLogWriter {
  /** Counters (appends, and fsyncs or PUTs). */
  readonly stats: LogWriterStats;
  /** True while lines are waiting, being written or waiting for their fsync (or PUT). */
  readonly busy: boolean;
  /** Appends `line` (ending with `\n`; a string is written as UTF-8); with `durable`, resolves once it is on stable storage. */
  append(line: string | Buffer, durable: boolean): Promise<void>;
  /** Waits for pending appends and closes. */
  close(): Promise<void>;
}

interface Line {
  buf: Buffer;
  durable: boolean;
  resolve: () => void;
  reject: (e: unknown) => void;
}

/** An open session event log. Create with {@link EventLogWriter.open}. */
export class EventLogWriter implements SessionLogWriter {
  /** Counters (appends, fsyncs). */
  readonly stats: LogWriterStats = { appends: 0, syncs: 0 };
  private readonly handle: StoreFile;
  private readonly io: StoreIO;
  /**
   * Set when a write failed: part of a line may be in the file. The next batch
   * starts with `\n`, so that fragment stays one (skipped) line instead of
   * swallowing the next record (an empty line is skipped silently).
   */
  private torn = false;
  /** Lines waiting for the next write. */
  private pending: Line[] = [];
  /** Durable lines written and waiting for an fsync that begins after their write. */
  private unsynced: Line[] = [];
  /** The write loop, while it runs. */
  private writing: Promise<void> | undefined;
  /** The fsync loop, while it runs. */
  private syncing: Promise<void> | undefined;
  /** fsyncs that failed so far: a write that began before one of them ended confirms none of its lines. */
  private syncFailures = 0;
  /** The error of the last failed fsync, for the lines its failure makes unconfirmable. */
  private syncError: unknown;
  private closed = false;

  private constructor(handle: StoreFile, io: StoreIO) {
    this.handle = handle;
    this.io = io;
  }

  /** Opens (creating durably when needed) the log of session `id`. */
  static async open(store: Store, id: string): Promise<EventLogWriter> {
    const path = eventLogPath(store.layout, id);
    const dir = dirname(path);
    const io = store.io;
    try {
      const created =
        (await fsp.mkdir(dir, { recursive: true, mode: 0o700 }).catch(async (err: { code?: unknown }) => {
          // Node says ENOENT when it cannot create the last directory: learn why (EROFS, EACCES).
          if (err?.code === 'ENOENT') await makeDirs(dir);
          throw err;
        })) !== undefined;
      // Non-blocking: opening a FIFO in the log's place for writing must fail (ENXIO), not wait for a reader.
      const handle = await io.open(
        path,
        constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NONBLOCK,
        0o600,
      );
      try {
        if (created) {
          // The new directory entry must survive a crash as well as the lines in it.
          await io.fsyncDir(dir);
          await io.fsyncDir(store.layout.sessions);
        }
        await repairTornTail(io, path, handle);
      } catch (err) {
        await handle.close();
        throw err;
      }
      return new EventLogWriter(handle, io);
    } catch (err) {
      throw toSluiceError(err, 'EDISK');
    }
  }

  /** True while lines are waiting, being written or waiting for their fsync. */
  get busy(): boolean {
    return this.writing !== undefined || this.syncing !== undefined;
  }

  /**
   * Appends `line` (which ends with `\n`). Resolves once it is written; with
   * `durable`, only once it is on stable storage.
   */
  append(line: string | Buffer, durable: boolean): Promise<void> {
    if (this.closed) return Promise.reject(toSluiceError(new Error('session log is closed'), 'ECLOSED'));
    return new Promise((resolve, reject) => {
      const buf = typeof line === 'string' ? Buffer.from(line, 'utf8') : line;
      this.pending.push({ buf, durable, resolve, reject });
      this.writing ??= this.writeLoop();
    });
  }

  /** Writes batches until nothing is pending: one write per batch, in append order. */
  private async writeLoop(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending;
      this.pending = [];
      const failuresBefore = this.syncFailures;
      try {
        const bufs = batch.map((b) => b.buf);
        if (this.torn) bufs.unshift(Buffer.from('\n'));
        this.torn = true;
        await writeAll(this.io, this.handle, bufs.length === 1 ? (bufs[0] as Buffer) : Buffer.concat(bufs), null);
        this.torn = false;
        this.stats.appends += batch.length;
      } catch (err) {
        const e = toSluiceError(err, 'EDISK');
        for (const b of batch) b.reject(e);
        continue;
      }
      // An fsync failed while this write ran: its bytes may have been in that writeback.
      const unconfirmable = this.syncFailures !== failuresBefore;
      for (const b of batch) {
        if (!b.durable) b.resolve();
        else if (unconfirmable) b.reject(this.syncError);
        else this.unsynced.push(b);
      }
      if (this.unsynced.length > 0) this.syncing ??= this.syncLoop();
    }
    this.writing = undefined;
  }

  /** fsyncs until no written durable line waits: each fsync covers the lines written before it began. */
  private async syncLoop(): Promise<void> {
    // Nothing before `syncing` holds this loop: a custom StoreIO whose datasync throws synchronously
    // would end the loop first, and `syncing` would keep the ended loop (later lines never synced).
    await Promise.resolve();
    while (this.unsynced.length > 0) {
      const covered = this.unsynced;
      this.unsynced = [];
      try {
        this.stats.syncs++;
        await this.io.datasync(this.handle);
        for (const b of covered) b.resolve();
      } catch (err) {
        // A failed fsync fails every line it covered, and every line written while it ran: the
        // error is reported once, so the next fsync could succeed without those bytes on disk.
        const e = toSluiceError(err, 'EDISK');
        this.syncFailures++;
        this.syncError = e;
        const failed = covered.concat(this.unsynced);
        this.unsynced = [];
        for (const b of failed) b.reject(e);
      }
    }
    this.syncing = undefined;
  }

  /** Waits for pending appends and closes the file. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    while (this.writing || this.syncing) await (this.writing ?? this.syncing);
    await this.handle.close().catch(() => {});
  }
}

/** Ends a torn last line with `\n` so the next record starts on a line of its own. */
async function repairTornTail(io: StoreIO, path: string, handle: StoreFile): Promise<void> {
  const st = await handle.stat();
  if (!st.isFile()) throw new IntegrityError(`the event log ${path} is not a regular file`, { path });
  const { size } = st;
  if (size === 0) return;
  const reader = await fsp.open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const last = Buffer.alloc(1);
    await reader.read(last, 0, 1, size - 1);
    if (last[0] !== 0x0a) {
      await writeAll(io, handle, Buffer.from('\n'), null);
      await io.datasync(handle);
    }
  } finally {
    await reader.close();
  }
}
