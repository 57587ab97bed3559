/**
 * Record fields past the inline bound move into one spill blob per record,
 * published under a pin released only once the record is appended, so GC
 * never sees it unreferenced and unpinned.
 */
import { createHash } from 'node:crypto';
import { openBlob } from '../../store/blob-handle.js';
import type { Pin, Store } from '../../store/store.js';
import { IntegrityError, NotFoundError, ResourceLimitError, toSluiceError } from '../protocol/errors.js';
import type { SpillRef } from './records.js';

/** Marks a spill blob. */
export const SPILL_KIND = 'sluice.spill/1';

/** Default bound on one field's inline JSON, in bytes. */
export const DEFAULT_INLINE_FIELD_BYTES = 64 * 1024;

/** Largest spill blob a reader loads into memory. */
export const MAX_SPILL_BYTES = 256 * 1024 * 1024;

/** A record with its oversized fields moved out, and the pin protecting the spill blob (release after appending). */
export interface Spilled<T> {
  record: T;
  pin?: Pin;
}

/** Moves every field of `record` named in `fields` whose JSON passes `limit` bytes into one spill blob (no pin when none does). */
export async function spillOversized<T extends object>(
  store: Store,
  record: T,
  fields: readonly string[],
  limit: number,
): Promise<Spilled<T>> {
  const moved: Record<string, unknown> = {};
  const names: string[] = [];
  const rec = record as Record<string, unknown>;
  for (const f of fields) {
    const v = rec[f];
    if (v === undefined || surelyWithin(v, limit)) continue;
    if (Buffer.byteLength(JSON.stringify(v) ?? '', 'utf8') > limit) {
      moved[f] = v;
      names.push(f);
    }
  }
  if (names.length === 0) return { record };
  const pin = await store.pin();
  try {
    const info = await store.publishBytes(`${JSON.stringify({ kind: SPILL_KIND, fields: moved })}\n`, undefined, pin);
    const out = { ...rec } as Record<string, unknown>;
    for (const f of names) delete out[f];
    out.spill = { digest: info.digest, bytes: info.bytes, fields: names } satisfies SpillRef;
    return { record: out as T, pin };
  } catch (err) {
    await pin.release();
    throw err;
  }
}

/**
 * True when the JSON of `v` cannot pass `limit` bytes, known without
 * serialising it (a string's JSON is at most 6 bytes per UTF-16 unit plus
 * its quotes): the record is serialised whole anyway.
 */
function surelyWithin(v: unknown, limit: number): boolean {
  if (typeof v === 'string') return v.length * 6 + 2 <= limit;
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return 24 <= limit;
  if (limit < 2 || typeof v !== 'object') return false;
  if (Array.isArray(v)) return v.length === 0;
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return false;
  for (const _ in v) return false;
  return true;
}

/** Reads a blob whole, checking its digest, writing nothing (replay leaves the store untouched). ENOTFOUND, EINTEGRITY, ERESOURCELIMIT. */
export async function readBlobWhole(store: Store, digest: string, maxBytes = MAX_SPILL_BYTES): Promise<Buffer> {
  let buf: Buffer;
  try {
    // The store's one read seam: a blob file, a packed copy, or one a collection has moved aside.
    const h = await openBlob(store, digest);
    try {
      const st = await h.identity();
      // A FIFO or device in its place (opened without blocking) is not the blob.
      if (!st.isFile) throw new IntegrityError(`artifact ${digest} is not a regular file in the store`, { digest });
      if (st.size > maxBytes) {
        throw new ResourceLimitError(`blob ${digest} has ${st.size} bytes, more than ${maxBytes} can be loaded`, {
          digest,
        });
      }
      buf = Buffer.allocUnsafe(st.size);
      let off = 0;
      while (off < st.size) {
        const { bytesRead } = await h.read(buf, off, st.size - off, off);
        if (bytesRead === 0) break;
        off += bytesRead;
      }
      if (off < st.size) buf = buf.subarray(0, off);
    } finally {
      await h.close();
    }
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOTFOUND') {
      throw new NotFoundError(`artifact ${digest} is not in the store (it may have been garbage-collected)`, {
        digest,
      });
    }
    throw toSluiceError(err, 'EDISK');
  }
  const actual = createHash('sha256').update(buf).digest('hex');
  if (actual !== digest) {
    throw new IntegrityError(`artifact ${digest} is corrupt: its content hashes to ${actual}`, { digest, actual });
  }
  return buf;
}

/** The fields stored in a spill blob. Fails with ENOTFOUND, EINTEGRITY or EPROTOCOL (not a spill blob). */
export async function loadSpill(store: Store, ref: SpillRef): Promise<Record<string, unknown>> {
  const buf = await readBlobWhole(store, ref.digest);
  let parsed: unknown;
  try {
    parsed = JSON.parse(buf.toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const p = parsed as { kind?: unknown; fields?: unknown } | undefined;
  if (p?.kind !== SPILL_KIND || p.fields === null || typeof p.fields !== 'object') {
    throw toSluiceError(new Error(`blob ${ref.digest} is not a session spill blob`), 'EPROTOCOL');
  }
  return p.fields as Record<string, unknown>;
}
