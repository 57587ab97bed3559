/**
 * Keeping log lines bounded: a record field whose JSON is larger than the
 * inline bound (arguments, a long final display, a large model view,
 * attachments) is moved into one "spill" blob per record, stored in the
 * content-addressed store like any output, and the record keeps only its
 * reference. While the record's call is live that blob is a GC root.
 *
 * The spill blob is published under a pin that the caller releases only
 * after the record referencing it has been appended, so a concurrent GC never
 * sees it unreferenced and unpinned.
 */
import { createHash } from 'node:crypto';
import { blobBackendOf } from '../../store/backend.js';
import { READ_STORE_FILE, type StoreFile } from '../../store/file.js';
import type { Pin, Store } from '../../store/store.js';
import { openTombstoned } from '../../store/tombstone.js';
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

/**
 * Moves every field of `record` named in `fields` whose JSON exceeds `limit`
 * bytes into one spill blob. Returns the record unchanged (and no pin) when
 * nothing is oversized.
 */
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
    if (v === undefined) continue;
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
 * Reads a blob whole, checking its digest, without writing anything to the
 * store (no index, no cache file): replay must leave the store untouched.
 *
 * @throws NotFoundError (ENOTFOUND), IntegrityError (EINTEGRITY), ResourceLimitError (ERESOURCELIMIT).
 */
export async function readBlobWhole(store: Store, digest: string, maxBytes = MAX_SPILL_BYTES): Promise<Buffer> {
  let buf: Buffer;
  try {
    const fh = await openBlobOrTombstone(store, digest);
    try {
      const st = await fh.stat();
      // A FIFO or device in its place (opened without blocking) is not the blob.
      if (!st.isFile()) throw new IntegrityError(`artifact ${digest} is not a regular file in the store`, { digest });
      if (st.size > maxBytes) {
        throw new ResourceLimitError(`blob ${digest} has ${st.size} bytes, more than ${maxBytes} can be loaded`, {
          digest,
        });
      }
      buf = await fh.readFile();
    } finally {
      await fh.close();
    }
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') {
      throw new NotFoundError(`artifact ${digest} is not in the store (it may have been garbage-collected)`, {
        digest,
      });
    }
    if ((err as { code?: unknown }).code === 'ELOOP') {
      throw new IntegrityError(`artifact ${digest} is a symbolic link in the store, not a blob`, { digest });
    }
    throw toSluiceError(err, 'EDISK');
  }
  const actual = createHash('sha256').update(buf).digest('hex');
  if (actual !== digest) {
    throw new IntegrityError(`artifact ${digest} is corrupt: its content hashes to ${actual}`, { digest, actual });
  }
  return buf;
}

async function openBlobOrTombstone(store: Store, digest: string): Promise<StoreFile> {
  const backend = blobBackendOf(store);
  if (backend) return backend.openBlob(digest);
  try {
    // Not through a symbolic link planted in the store (see store/integrity.ts).
    return await store.io.open(store.layout.blobPath(digest), READ_STORE_FILE);
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'ENOENT') throw err;
    // A collection may have it aside for an instant (store/tombstone.ts).
    const fh = await openTombstoned(store, digest);
    if (!fh) throw err;
    return fh;
  }
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
