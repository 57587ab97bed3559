/**
 * Session records in an S3 store: keys and the batch object layout, framed
 * lines then a `#end` trailer (docs/store.md, "Session records on S3"). A
 * batch without a valid trailer is partial, each line trusted only by its own checksum.
 */
import type { XXHashAPI } from 'xxhash-wasm';
import type { S3Objects } from '../../store/s3/objects.js';
import type { Store } from '../../store/store.js';
import { checksumOf } from './frame.js';

/** Digits of a batch's sequence number in its key (zero-padded, so key order is numeric order). */
export const SEQ_DIGITS = 12;

/** The largest trailer line: `#end `, two numbers, a space, 16 hex, `\n`. */
export const MAX_TRAILER_BYTES = 64;

/** The line a partial batch that ended on a line boundary gets in the mirror: not a frame, so it counts as one corrupt line. */
export const PARTIAL_BATCH_LINE = Buffer.from('!partial batch: its trailer is missing\n');

/** The line the mirror gets where batch numbers skip (a batch deleted behind sluice's back), so the loss shows as a corrupt line. */
export const MISSING_BATCHES_LINE = Buffer.from('!missing batches: numbers skip here\n');

/** What the session records of an S3 store need: its object layer and key prefix. */
export interface S3Records {
  readonly objects: S3Objects;
  /** `''` or `<prefix>/`. */
  readonly base: string;
}

/** The S3 side of `store`'s sessions, or undefined for a directory store. */
export function s3RecordsOf(store: Store): S3Records | undefined {
  const bucket = store.backend.bucket;
  return bucket && { objects: bucket.objects, base: bucket.keyBase };
}

/** Prefix of every session's batches: `<prefix>/sessions/`. */
export function sessionsPrefix(s3: S3Records): string {
  return `${s3.base}sessions/`;
}

/** Prefix of session `id`'s batches: `<prefix>/sessions/<id>/`. */
export function sessionPrefix(s3: S3Records, id: string): string {
  return `${sessionsPrefix(s3)}${id}/`;
}

/** Key of batch `seq` of session `id`. */
export function batchKey(s3: S3Records, id: string, seq: number): string {
  return `${sessionPrefix(s3, id)}${String(seq).padStart(SEQ_DIGITS, '0')}`;
}

const SEQ_NAME = new RegExp(`^[0-9]{${SEQ_DIGITS}}$`);

/** The sequence number of `key` under `prefix`, or undefined when it is not a batch key. */
export function seqOfKey(prefix: string, key: string): number | undefined {
  const name = key.slice(prefix.length);
  return key.startsWith(prefix) && SEQ_NAME.test(name) ? Number(name) : undefined;
}

/** The body of a batch object: `lines` (each ending with `\n`) and their trailer. */
export function encodeBatch(h: XXHashAPI, lines: readonly Buffer[]): Buffer {
  let bytes = 0;
  for (const l of lines) bytes += l.length;
  const head = `#end ${lines.length} ${bytes}`;
  return Buffer.concat([...lines, Buffer.from(`${head} ${checksumOf(h, head)}\n`, 'latin1')]);
}

const TRAILER = /^#end ([0-9]{1,9}) ([0-9]{1,15}) ([0-9a-f]{16})$/;

/** What of a batch goes into a mirror: `keep` bytes, then `extra`, so the next batch starts on a line of its own and a partial one shows. */
export function normalizeBatch(h: XXHashAPI, size: number, tail: Buffer): { keep: number; extra: Buffer } {
  if (size === 0) return { keep: 0, extra: PARTIAL_BATCH_LINE };
  if (tail[tail.length - 1] !== 0x0a) return { keep: size, extra: Buffer.from('\n') };
  const before = tail.lastIndexOf(0x0a, tail.length - 2);
  const start = before + 1;
  // A trailer that does not start within the tail cannot be one (it is longer than any trailer).
  if (before === -1 && tail.length < size) return { keep: size, extra: PARTIAL_BATCH_LINE };
  const line = tail.subarray(start, tail.length - 1).toString('latin1');
  const m = TRAILER.exec(line);
  const trailerAt = size - (tail.length - start);
  if (m && Number(m[2]) === trailerAt && checksumOf(h, `#end ${m[1]} ${m[2]}`) === m[3]) {
    return { keep: trailerAt, extra: Buffer.alloc(0) };
  }
  // A damaged trailer is a line no reader trusts (it counts as corrupt); a missing one is marked.
  return line.startsWith('#end ') ? { keep: size, extra: Buffer.alloc(0) } : { keep: size, extra: PARTIAL_BATCH_LINE };
}
