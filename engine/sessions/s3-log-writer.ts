/**
 * Appending to an S3 session with group commit: each batch becomes one
 * object created with `If-None-Match: *`, under a dense sequence number
 * shared by every host; a 412 means another host took it (docs/store.md,
 * "Session records on S3").
 */
import { createHash } from 'node:crypto';
import type { XXHashAPI } from 'xxhash-wasm';
import { DiskError, toSluiceError } from '../protocol/errors.js';
import { loadHasher } from './frame.js';
import type { LogWriterStats, SessionLogWriter } from './log-writer.js';
import { batchKey, encodeBatch, type S3Records, seqOfKey, sessionPrefix } from './s3-batch.js';

/** PUTs of one batch that found their number taken before the writer gives up (EDISK). */
const MAX_COLLISIONS = 64;

/** See the module comment. Create with {@link S3LogWriter.open}. */
export class S3LogWriter implements SessionLogWriter {
  readonly stats: LogWriterStats = { appends: 0, syncs: 0 };
  private pending: Array<{ buf: Buffer; resolve: () => void; reject: (e: unknown) => void }> = [];
  private flushing: Promise<void> | undefined;
  private closed = false;
  /** The number the next batch tries first; undefined until the session was listed. */
  private next: number | undefined;

  private constructor(
    private readonly s3: S3Records,
    private readonly id: string,
    private readonly h: XXHashAPI,
  ) {}

  /** A writer for session `id` (nothing is requested until the first append). */
  static async open(s3: S3Records, id: string): Promise<S3LogWriter> {
    return new S3LogWriter(s3, id, await loadHasher());
  }

  get busy(): boolean {
    return this.flushing !== undefined;
  }

  /** Appends `line` (ending with `\n`); resolves once its batch object is stored, whatever `durable` says. */
  append(line: string | Buffer, _durable: boolean): Promise<void> {
    if (this.closed) return Promise.reject(toSluiceError(new Error('session log is closed'), 'ECLOSED'));
    return new Promise((resolve, reject) => {
      this.pending.push({ buf: typeof line === 'string' ? Buffer.from(line, 'utf8') : line, resolve, reject });
      this.flushing ??= this.flush();
    });
  }

  /** Waits for pending appends (nothing else is held open). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    while (this.flushing) await this.flushing;
  }

  private async flush(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending;
      this.pending = [];
      try {
        await this.put(
          encodeBatch(
            this.h,
            batch.map((b) => b.buf),
          ),
        );
        this.stats.appends += batch.length;
        this.stats.syncs++;
        for (const b of batch) b.resolve();
      } catch (err) {
        const e = toSluiceError(err, 'EDISK');
        for (const b of batch) b.reject(e);
      }
    }
    this.flushing = undefined;
  }

  private async put(body: Buffer): Promise<void> {
    const etag = `"${createHash('md5').update(body).digest('hex')}"`;
    let seq = this.next ?? (await this.lastSeq(undefined)).last + 1;
    for (let collisions = 0; ; collisions++) {
      if ((await this.s3.objects.putIfAbsent(batchKey(this.s3, this.id, seq), body)) !== undefined) {
        this.next = seq + 1;
        return;
      }
      if (collisions >= MAX_COLLISIONS) {
        throw new DiskError(
          `session ${JSON.stringify(this.id)}: ${MAX_COLLISIONS} batch numbers in a row were taken by other writers`,
          { session: this.id },
        );
      }
      const seen = await this.lastSeq(seq - 1);
      // Our own earlier try landed (its answer was lost and the SDK tried again).
      if (seen.first?.seq === seq && seen.first.etag === etag) {
        this.next = seq + 1;
        return;
      }
      // Taken: the number after the last one listed; nothing there (a racing write answered 409, or a
      // delete since): this number again, so numbers stay dense.
      seq = seen.last >= seq ? seen.last + 1 : seq;
    }
  }

  /** The last batch number after `after` (-1 or `after` when there is none), and the first one listed. */
  private async lastSeq(after: number | undefined): Promise<{ last: number; first?: { seq: number; etag: string } }> {
    const prefix = sessionPrefix(this.s3, this.id);
    let last = after ?? -1;
    let first: { seq: number; etag: string } | undefined;
    const from = after !== undefined && after >= 0 ? batchKey(this.s3, this.id, after) : undefined;
    for await (const o of this.s3.objects.list(prefix, from)) {
      const seq = seqOfKey(prefix, o.key);
      if (seq === undefined) continue;
      first ??= { seq, etag: o.etag };
      if (seq > last) last = seq;
    }
    return first ? { last, first } : { last };
  }
}
