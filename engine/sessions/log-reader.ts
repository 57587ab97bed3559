/**
 * Reading a session event log: line by line, in bounded memory, trusting
 * only lines whose checksum matches. A torn or corrupted line is skipped and
 * counted, never fatal; the lines after it still count.
 */
import { promises as fsp } from 'node:fs';
import type { Store } from '../../store/store.js';
import { NotFoundError, toSluiceError } from '../protocol/errors.js';
import { loadHasher, unframeLine } from './frame.js';
import { parseRecord, type SessionRecord } from './records.js';
import { assertSessionId, eventLogPath } from './session-id.js';

/** A line longer than this is corrupt (records are far smaller: large fields are spilled). */
export const MAX_LINE_BYTES = 4 * 1024 * 1024;

const READ_CHUNK = 256 * 1024;
const DIGEST_IN_TEXT = /[0-9a-f]{64}/g;

/** What reading a log found. */
export interface EventLogContents {
  /** Records in log order. */
  records: SessionRecord[];
  /** Lines skipped as torn or corrupt (bad checksum, bad frame, too long). */
  corrupt: number;
  /** Intact lines of a record type this version does not know (skipped). */
  unknown: number;
  /** Intact lines of a known type that lack what it cannot do without (skipped). */
  invalid: number;
  /** Digests mentioned in corrupt lines: GC keeps them, since it cannot tell what the line meant. */
  corruptDigests: Set<string>;
  /** Size of the log in bytes. */
  bytes: number;
  /** Last modification of the log. */
  modifiedAt: Date;
}

/**
 * Reads the event log of session `id`.
 *
 * @throws BadArgumentsError (EBADARGS) for an invalid id.
 * @throws NotFoundError (ENOTFOUND) when the session has no log.
 * @throws DiskError (EDISK) when the log cannot be read.
 */
export async function readEventLog(store: Store, id: string): Promise<EventLogContents> {
  const records: SessionRecord[] = [];
  const counts = await scanEventLog(store, id, (r) => records.push(r));
  return { records, ...counts };
}

/**
 * Like {@link readEventLog}, but hands each record to `onRecord` as it is
 * read instead of keeping them, so memory stays bounded by what the caller
 * keeps (GC keeps only references).
 */
export async function scanEventLog(
  store: Store,
  id: string,
  onRecord: (record: SessionRecord) => void,
): Promise<Omit<EventLogContents, 'records'>> {
  assertSessionId(id);
  const h = await loadHasher();
  const out: Omit<EventLogContents, 'records'> = {
    corrupt: 0,
    unknown: 0,
    invalid: 0,
    corruptDigests: new Set(),
    bytes: 0,
    modifiedAt: new Date(0),
  };
  let fh: fsp.FileHandle;
  try {
    fh = await fsp.open(eventLogPath(store.layout, id), 'r');
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') {
      throw new NotFoundError(`no session ${JSON.stringify(id)} in the store`, { session: id });
    }
    throw toSluiceError(err, 'EDISK');
  }
  const onLine = (line: Buffer | undefined): void => {
    if (line === undefined) {
      out.corrupt++;
      return;
    }
    if (line.length === 0) return;
    const json = unframeLine(h, line);
    if (json === undefined) {
      out.corrupt++;
      for (const m of line.toString('latin1').matchAll(DIGEST_IN_TEXT)) out.corruptDigests.add(m[0]);
      return;
    }
    const parsed = parseRecord(json);
    if (parsed.kind === 'record') onRecord(parsed.record);
    else if (parsed.kind === 'unknown') out.unknown++;
    else out.invalid++;
  };
  try {
    const st = await fh.stat();
    out.bytes = st.size;
    out.modifiedAt = st.mtime;
    await splitLines(fh, st.size, onLine);
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  } finally {
    await fh.close();
  }
  return out;
}

/**
 * Calls `onLine` with each line (without its `\n`) of the first `size` bytes,
 * including a last line without `\n`; a line over {@link MAX_LINE_BYTES} is
 * reported as `undefined` and never buffered whole.
 */
async function splitLines(fh: fsp.FileHandle, size: number, onLine: (line: Buffer | undefined) => void): Promise<void> {
  const buf = Buffer.allocUnsafe(READ_CHUNK);
  let parts: Buffer[] = [];
  let partBytes = 0;
  let oversized = false;
  let position = 0;
  const take = (piece: Buffer) => {
    if (oversized) return;
    if (partBytes + piece.length > MAX_LINE_BYTES) {
      oversized = true;
      parts = [];
      partBytes = 0;
      return;
    }
    // Copied: the read buffer is reused.
    parts.push(Buffer.from(piece));
    partBytes += piece.length;
  };
  const endLine = () => {
    onLine(oversized ? undefined : parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, partBytes));
    parts = [];
    partBytes = 0;
    oversized = false;
  };
  while (position < size) {
    const { bytesRead } = await fh.read(buf, 0, Math.min(READ_CHUNK, size - position), position);
    if (bytesRead === 0) break;
    position += bytesRead;
    let start = 0;
    for (let nl = buf.indexOf(0x0a, 0); nl !== -1 && nl < bytesRead; nl = buf.indexOf(0x0a, start)) {
      take(buf.subarray(start, nl));
      endLine();
      start = nl + 1;
    }
    if (start < bytesRead) take(buf.subarray(start, bytesRead));
  }
  if (partBytes > 0 || oversized) endLine();
}
