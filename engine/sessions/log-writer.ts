/**
 * Appending to one session's event log with group commit: while a batch is
 * written and fsynced, new lines wait and the next batch takes them all, so
 * N completions cost about two fsyncs, not N (docs/benchmarks.md, "Session
 * log writes"). A torn last line gets a newline first, so it never swallows the next record.
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
  appends: number;
  /** fsyncs performed (on an S3 store: batch objects PUT, one per group commit). */
  syncs: number;
}

/** What the recorder appends through: a local log ({@link EventLogWriter}) or an S3 session (s3-log-writer.ts). */
export interface SessionLogWriter {
  readonly stats: LogWriterStats;
  /** True while lines are waiting, being written or waiting for their fsync (or PUT). */
  readonly busy: boolean;
  /** Appends `line` (ending with `\n`; a string is written as UTF-8); with `durable`, resolves once it is on stable storage. */
  append(line: string | Buffer, durable: boolean): Promise<void>;
  close(): Promise<void>;
}

/** An open session event log. Create with {@link EventLogWriter.open}. */
export class EventLogWriter implements SessionLogWriter {
  readonly stats: LogWriterStats = { appends: 0, syncs: 0 };
  private readonly handle: StoreFile;
  private readonly io: StoreIO;
  /** Set when a write failed, so that the next batch starts with `\n` and the fragment stays one skipped line. */
  private torn = false;
  private pending: Array<{ buf: Buffer; durable: boolean; resolve: () => void; reject: (e: unknown) => void }> = [];
  private flushing: Promise<void> | undefined;
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

  get busy(): boolean {
    return this.flushing !== undefined;
  }

  /** Appends `line` (ending with `\n`); with `durable`, resolves only once it is on stable storage. */
  append(line: string | Buffer, durable: boolean): Promise<void> {
    if (this.closed) return Promise.reject(toSluiceError(new Error('session log is closed'), 'ECLOSED'));
    return new Promise((resolve, reject) => {
      const buf = typeof line === 'string' ? Buffer.from(line, 'utf8') : line;
      this.pending.push({ buf, durable, resolve, reject });
      this.flushing ??= this.flush();
    });
  }

  /** Writes batches until nothing is pending: one write and at most one fsync per batch. */
  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending;
      this.pending = [];
      try {
        const bufs = batch.map((b) => b.buf);
        if (this.torn) bufs.unshift(Buffer.from('\n'));
        this.torn = true;
        await writeAll(this.io, this.handle, bufs.length === 1 ? (bufs[0] as Buffer) : Buffer.concat(bufs), null);
        this.torn = false;
        this.stats.appends += batch.length;
        if (batch.some((b) => b.durable)) {
          this.stats.syncs++;
          await this.io.datasync(this.handle);
        }
        for (const b of batch) b.resolve();
      } catch (err) {
        // A failed fsync fails every line of its batch: durability was not confirmed.
        const e = toSluiceError(err, 'EDISK');
        for (const b of batch) b.reject(e);
      }
    }
    this.flushing = undefined;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    while (this.flushing) await this.flushing;
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
