/** The session event log as the engine's {@link CallRecorder}: the terminal record is durable before the publication pin goes. */
import { crashPoint } from '../../store/crash-point.js';
import type { Store } from '../../store/store.js';
import type { CallRecorder, CallStartInfo } from '../call/call-types.js';
import { ClosedError } from '../protocol/errors.js';
import type { TerminalResult } from '../result.js';
import { frameLineBytes, loadHasher } from './frame.js';
import { EventLogWriter, type LogWriterStats, type SessionLogWriter } from './log-writer.js';
import { CALL_STARTED, encodeCompleted, type RevertRecord, SESSION_REVERT, type StartedRecord } from './records.js';
import { s3RecordsOf } from './s3-batch.js';
import { S3LogWriter } from './s3-log-writer.js';
import { assertSessionId } from './session-id.js';
import { DEFAULT_INLINE_FIELD_BYTES, spillOversized } from './spill.js';

/** Options of {@link SessionRecorder}. */
export interface SessionRecorderOptions {
  /** Largest JSON of one record field kept in the log line; larger fields go to a spill blob. @default 65536 */
  inlineFieldBytes?: number;
  /** Session logs kept open at once; the least recently used idle one is closed beyond this. @default 64 */
  maxOpenLogs?: number;
}

const STARTED_SPILLABLE = ['args'] as const;
/** Fields of a completed record that may be spilled (the output reference is bounded: at most 16 streams). */
const COMPLETED_SPILLABLE = ['display', 'model', 'metadata', 'attachments', 'messages', 'error'] as const;
/** A self-paginating tool's page is never retained as an artifact, and recording it must not make it one: its model view stays inline (the page bound is well under the line bound). */
const PAGE_SPILLABLE = ['display', 'metadata', 'attachments', 'messages', 'error'] as const;

interface OpenLog {
  writer: Promise<SessionLogWriter>;
  users: number;
}

/** Records calls into `sessions/<id>/events.log`, or an S3 store's batch objects (s3-log-writer.ts). */
export class SessionRecorder implements CallRecorder {
  private readonly store: Store;
  private readonly inlineFieldBytes: number;
  private readonly maxOpenLogs: number;
  private readonly logs = new Map<string, OpenLog>();
  private closed = false;

  constructor(store: Store, options: SessionRecorderOptions = {}) {
    this.store = store;
    this.inlineFieldBytes = options.inlineFieldBytes ?? DEFAULT_INLINE_FIELD_BYTES;
    this.maxOpenLogs = options.maxOpenLogs ?? 64;
  }

  /** Appends a `call.started` record (not fsynced: a lost start is only a lost line, and the terminal record's fsync covers it). */
  async started(info: CallStartInfo): Promise<void> {
    if (info.session === undefined) return;
    assertSessionId(info.session);
    const rec: StartedRecord = {
      type: CALL_STARTED,
      callId: info.callId,
      tool: info.tool.name,
      args: info.args,
      output: info.tool.output,
      at: info.at,
      ...(info.sandbox ? { sandbox: info.sandbox } : {}),
    };
    await this.appendRecord(info.session, rec, STARTED_SPILLABLE, false);
  }

  /** Appends the terminal record and resolves once it is fsynced. */
  async completed(result: TerminalResult): Promise<void> {
    if (result.session === undefined) return;
    assertSessionId(result.session);
    await this.appendRecord(
      result.session,
      encodeCompleted(result, new Date().toISOString()),
      result.output?.kind === 'page' ? PAGE_SPILLABLE : COMPLETED_SPILLABLE,
      true,
      true,
    );
  }

  /** Appends a durable `session.revert` record (the caller checked that `before` is live). */
  async revert(session: string, before: string): Promise<void> {
    assertSessionId(session);
    const rec: RevertRecord = { type: SESSION_REVERT, before, at: new Date().toISOString() };
    await this.appendRecord(session, rec, [], true);
  }

  /** Append and fsync counters of the open log of `session`, if it is open. */
  async stats(session: string): Promise<LogWriterStats | undefined> {
    const open = this.logs.get(session);
    return open ? (await open.writer).stats : undefined;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const all = [...this.logs.values()];
    this.logs.clear();
    await Promise.all(all.map(async (l) => (await l.writer.catch(() => undefined))?.close()));
  }

  private async appendRecord<T extends object>(
    session: string,
    record: T,
    spillable: readonly string[],
    durable: boolean,
    terminal = false,
  ): Promise<void> {
    if (this.closed) throw new ClosedError('the session recorder is closed');
    const h = await loadHasher();
    const spilled = await spillOversized(this.store, record, spillable, this.inlineFieldBytes);
    try {
      const line = frameLineBytes(h, JSON.stringify(spilled.record));
      const open = this.acquire(session);
      try {
        const writer = await open.writer;
        await writer.append(line, durable);
      } finally {
        open.users--;
      }
      if (terminal) crashPoint('record-appended');
    } finally {
      // The record is in the log (and durable when it had to be): the spill blob is referenced now.
      await spilled.pin?.release();
    }
  }

  private acquire(session: string): OpenLog {
    let open = this.logs.get(session);
    if (open) {
      // Most recently used last.
      this.logs.delete(session);
    } else {
      const s3 = s3RecordsOf(this.store);
      open = { writer: s3 ? S3LogWriter.open(s3, session) : EventLogWriter.open(this.store, session), users: 0 };
      // A failed open is not cached: the next record tries again.
      open.writer.catch(() => {
        if (this.logs.get(session) === open) this.logs.delete(session);
      });
    }
    this.logs.set(session, open);
    open.users++;
    this.evict();
    return open;
  }

  private evict(): void {
    if (this.logs.size <= this.maxOpenLogs) return;
    for (const [id, open] of this.logs) {
      if (this.logs.size <= this.maxOpenLogs) break;
      if (open.users > 0) continue;
      this.logs.delete(id);
      void open.writer.then(
        (w) => w.close(),
        () => {},
      );
    }
  }
}
