/** Reading a session event log in bounded memory, trusting only lines whose checksum matches; a bad line is counted, never fatal. */
import { constants, promises as fsp } from 'node:fs';
import type { XXHashAPI } from 'xxhash-wasm';
import type { Store } from '../../store/store.js';
import { IntegrityError, NotFoundError, toSluiceError } from '../protocol/errors.js';
import { loadHasher, unframeLine } from './frame.js';
import { parseRecord, type SessionRecord } from './records.js';
import { type S3Records, s3RecordsOf } from './s3-batch.js';
import { type MirrorView, noSuchSession, syncMirror } from './s3-mirror.js';
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

/** Reads the event log of session `id`. EBADARGS for an invalid id, ENOTFOUND without a log, EDISK when it cannot be read. */
export async function readEventLog(store: Store, id: string): Promise<EventLogContents> {
  const records: SessionRecord[] = [];
  const counts = await scanEventLog(store, id, (r) => records.push(r));
  return { records, ...counts };
}

/** Where a record's line is in its log: byte offset and length (without the `\n`). */
export interface LinePlace {
  offset: number;
  length: number;
}

/** Like {@link readEventLog}, handing each record and its place to `onRecord` instead of keeping them: memory stays bounded by what the caller keeps. */
export async function scanEventLog(
  store: Store,
  id: string,
  onRecord: (record: SessionRecord, place: LinePlace) => void,
): Promise<Omit<EventLogContents, 'records'>> {
  const log = await openEventLog(store, id);
  try {
    return await scanOpenLog(log, onRecord);
  } finally {
    await log.close();
  }
}

/** An event log opened for reading: scanned once, then read at the places the scan reported. */
export interface OpenEventLog {
  /** The record whose line is at `place`, or undefined if those bytes are no longer an intact record. */
  recordAt(place: LinePlace): Promise<SessionRecord | undefined>;
  close(): Promise<void>;
  /** Brings an S3 session's mirror up to date: false when the session changed under it (open it again); absent for a local file. */
  refresh?(): Promise<boolean>;
  /** @internal */
  readonly fh: fsp.FileHandle;
  /** @internal */
  readonly h: XXHashAPI;
  /** @internal How many bytes of `fh` are the log, and its time, when the file's own size and mtime are not (a mirror). */
  extent?(): { size: number; modifiedAt: Date };
}

/** Opens session `id`'s log; while open, it reads the file it opened, whatever happens to the path. EBADARGS, ENOTFOUND, EDISK. */
export async function openEventLog(store: Store, id: string): Promise<OpenEventLog> {
  const h = await loadHasher();
  const s3 = s3RecordsOf(store);
  if (s3) {
    assertSessionId(id);
    const { view, fh } = await openSyncedMirror(store, s3, id);
    let extent = { size: view.end, modifiedAt: view.modifiedAt };
    return {
      ...wrapLog(fh, h),
      extent: () => extent,
      async refresh() {
        const now = await syncMirror(store, s3, id);
        if (!now || now.path !== view.path) return false;
        extent = { size: now.end, modifiedAt: now.modifiedAt };
        return true;
      },
    };
  }
  return wrapLog(await openLog(store, id), h);
}

/** Syncs after a mirror file vanished before {@link openSyncedMirror} could open it, before giving up (EDISK). */
const MIRROR_OPEN_ATTEMPTS = 3;

/**
 * Brings session `id`'s mirror up to date and opens it. A mirror file gone
 * in between is no evidence that the session is gone, and GC skips
 * ENOTFOUND sessions: only a sync that finds no batch says ENOTFOUND.
 */
async function openSyncedMirror(
  store: Store,
  s3: S3Records,
  id: string,
): Promise<{ view: MirrorView; fh: fsp.FileHandle }> {
  for (let attempt = 1; ; attempt++) {
    const view = await syncMirror(store, s3, id);
    if (!view) throw noSuchSession(id);
    try {
      // Never through a link: the next sync replaces whatever is not the file it wrote.
      const flags = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW;
      return { view, fh: await fsp.open(view.path, flags) };
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if ((code !== 'ENOENT' && code !== 'ELOOP') || attempt >= MIRROR_OPEN_ATTEMPTS) {
        throw toSluiceError(err, 'EDISK');
      }
    }
  }
}

function wrapLog(fh: fsp.FileHandle, h: XXHashAPI): OpenEventLog {
  let closed: Promise<void> | undefined;
  return {
    fh,
    h,
    async recordAt(place) {
      const buf = Buffer.allocUnsafe(place.length);
      try {
        const { bytesRead } = await fh.read(buf, 0, place.length, place.offset);
        let found: SessionRecord | undefined;
        if (bytesRead === place.length) classifyLine(h, buf, (r) => (found = r));
        return found;
      } catch (err) {
        throw toSluiceError(err, 'EDISK');
      }
    },
    close() {
      closed ??= fh.close().catch(() => {});
      return closed;
    },
  };
}

/** What a scan of an open log found, and how far its complete lines went. */
export interface LogScan extends Omit<EventLogContents, 'records'> {
  /** Offset just past the last `\n` read: a scan resumed from here reads exactly the lines appended since. */
  end: number;
}

/** Scans an open log from `from` (0, or an earlier scan's {@link LogScan.end}) to its current end. */
export async function scanOpenLog(
  log: OpenEventLog,
  onRecord: (record: SessionRecord, place: LinePlace) => void,
  from = 0,
): Promise<LogScan> {
  const out: LogScan = {
    corrupt: 0,
    unknown: 0,
    invalid: 0,
    corruptDigests: new Set(),
    bytes: 0,
    modifiedAt: new Date(0),
    end: from,
  };
  try {
    const st = log.extent ? log.extent() : await log.fh.stat().then((s) => ({ size: s.size, modifiedAt: s.mtime }));
    out.bytes = st.size;
    out.modifiedAt = st.modifiedAt;
    for await (const lines of lineBatches(log.fh, from, st.size)) {
      for (const { line, offset, length, ended } of lines) {
        if (ended) out.end = offset + length + 1;
        const kind = classifyLine(log.h, line, (r) => onRecord(r, { offset, length }));
        if (kind === 'corrupt') {
          out.corrupt++;
          if (line) for (const m of line.toString('latin1').matchAll(DIGEST_IN_TEXT)) out.corruptDigests.add(m[0]);
        } else if (kind === 'unknown') out.unknown++;
        else if (kind === 'invalid') out.invalid++;
      }
    }
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  }
  return out;
}

async function openLog(store: Store, id: string): Promise<fsp.FileHandle> {
  assertSessionId(id);
  let fh: fsp.FileHandle;
  try {
    // Non-blocking: a FIFO in the log's place must not hold a thread (it is refused below).
    fh = await fsp.open(eventLogPath(store.layout, id), constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') {
      throw new NotFoundError(`no session ${JSON.stringify(id)} in the store`, { session: id });
    }
    throw toSluiceError(err, 'EDISK');
  }
  try {
    if (!(await fh.stat()).isFile()) {
      throw new IntegrityError(`the event log of session ${JSON.stringify(id)} is not a regular file`, { session: id });
    }
  } catch (err) {
    await fh.close();
    throw toSluiceError(err, 'EDISK');
  }
  return fh;
}

/** What one line is; an intact record goes to `onRecord`. */
function classifyLine(
  h: XXHashAPI,
  line: Buffer | undefined,
  onRecord: (record: SessionRecord) => void,
): 'record' | 'empty' | 'corrupt' | 'unknown' | 'invalid' {
  if (line === undefined) return 'corrupt';
  if (line.length === 0) return 'empty';
  const json = unframeLine(h, line);
  if (json === undefined) return 'corrupt';
  const parsed = parseRecord(json);
  if (parsed.kind === 'record') {
    onRecord(parsed.record);
    return 'record';
  }
  return parsed.kind === 'unknown' ? 'unknown' : 'invalid';
}

/** One line of a log: its bytes (undefined when oversized), where it starts, its length, whether a `\n` ended it. */
interface RawLine {
  line: Buffer | undefined;
  offset: number;
  length: number;
  ended: boolean;
}

/** The lines (without `\n`) from `from` to `size`, one read's worth at a time; a line over {@link MAX_LINE_BYTES} comes as `undefined`, never buffered whole. */
async function* lineBatches(fh: fsp.FileHandle, from: number, size: number): AsyncGenerator<RawLine[]> {
  const buf = Buffer.allocUnsafe(READ_CHUNK);
  let parts: Buffer[] = [];
  let partBytes = 0;
  let lineBytes = 0;
  let oversized = false;
  let position = from;
  let lineStart = from;
  let batch: RawLine[] = [];
  const take = (piece: Buffer) => {
    lineBytes += piece.length;
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
  const endLine = (ended: boolean) => {
    const line = oversized ? undefined : parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, partBytes);
    batch.push({ line, offset: lineStart, length: lineBytes, ended });
    lineStart += lineBytes + 1;
    parts = [];
    partBytes = 0;
    lineBytes = 0;
    oversized = false;
  };
  while (position < size) {
    const { bytesRead } = await fh.read(buf, 0, Math.min(READ_CHUNK, size - position), position);
    if (bytesRead === 0) break;
    position += bytesRead;
    let start = 0;
    for (let nl = buf.indexOf(0x0a, 0); nl !== -1 && nl < bytesRead; nl = buf.indexOf(0x0a, start)) {
      take(buf.subarray(start, nl));
      endLine(true);
      start = nl + 1;
    }
    if (start < bytesRead) take(buf.subarray(start, bytesRead));
    if (batch.length > 0) {
      yield batch;
      batch = [];
    }
  }
  if (lineBytes > 0 || oversized) endLine(false);
  if (batch.length > 0) yield batch;
}
