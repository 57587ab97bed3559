/**
 * Verify of an S3 store: every blob object and packed blob hashed, streamed in ranged GETs
 * of one block at a time (store/s3/remote-file.ts), so memory is one block
 * whatever the object's size; corrupt ones reported; manifest references
 * that are absent reported as missing; packs whose index cannot be read
 * reported as such (what they hold cannot be checked).
 *
 * `repair` deletes each corrupt object, so that it is missing rather than
 * wrong (a read is ENOTFOUND instead of EINTEGRITY, and verify of the
 * sessions lists the records that reference it), and the next publish of
 * its content, on any host, uploads a good copy. The version deleted is the
 * one found corrupt: its ETag is checked again just before the delete, and
 * one a publisher has replaced meanwhile (healed) is left in place. S3 has
 * no conditional delete, so a heal landing between that HEAD and the
 * DELETE is deleted with it; the publisher's next publish of that content
 * heals it again (docs/operations.md, "Verify on S3").
 */
import { NotFoundError } from '../../engine/protocol/errors.js';
import { fileHandle } from '../blob-handle.js';
import { checkBlob } from '../integrity.js';
import type { Store } from '../store.js';
import { countIntact, emptyVerifyReport, type VerifyOptions, type VerifyReport } from '../verify.js';
import type { S3Backend } from './backend.js';

const BLOB_KEY = /^blobs\/sha256\/([0-9a-f]{2})\/([0-9a-f]{62})$/;

/** Hashes every blob of the S3 store `store` (see the module comment). */
export async function verifyS3Store(
  store: Store,
  backend: S3Backend,
  options: VerifyOptions = {},
): Promise<VerifyReport> {
  const report = emptyVerifyReport();
  const present = new Set<string>();
  const referenced = new Set<string>();
  const prefix = `${backend.keyBase}blobs/`;
  for await (const o of backend.objects.list(prefix)) {
    const rel = o.key.slice(backend.keyBase.length);
    const m = BLOB_KEY.exec(rel);
    if (!m) {
      report.unexpected.push(rel);
      continue;
    }
    const digest = `${m[1]}${m[2]}`;
    let etag: string | undefined;
    const check = await checkBlob(store, digest, async () => {
      const opened = await backend.openObject(digest);
      etag = opened.head.etag;
      return fileHandle(opened.file);
    });
    // Deleted while we looked (a collection): never there for this report.
    if (check.status === 'missing') continue;
    report.scanned++;
    if (check.status === 'corrupt') {
      report.corrupt.push(digest);
      if (options.repair && etag !== undefined) {
        const failed = await removeCorrupt(backend, digest, etag);
        if (failed) {
          report.repairFailed.push(`${digest}: ${failed}`);
          present.add(digest);
        } else report.quarantined.push(digest);
      } else present.add(digest);
      continue;
    }
    await countIntact(store, digest, check.bytes, report, present, referenced);
  }
  // Packed blobs: each record hashed. A corrupt one is reported; a pack holds other blobs, so repair leaves it
  // (publishing the content again packs a good copy, which reads then find).
  // Every index from the bucket: an audit does not take the host's cached copies on trust.
  for (const pack of await backend.packObjects.list(true)) {
    if (!pack.indexed) {
      report.unreadablePacks.push(`${pack.key.slice(backend.keyBase.length)}: ${pack.unreadable ?? 'unknown'}`);
      continue;
    }
    for (const e of pack.entries) {
      const loc = { key: pack.key, etag: pack.etag, offset: e.offset, length: e.length };
      const check = await checkBlob(store, e.digest, async () => {
        const h = await backend.packObjects.open(e.digest, loc);
        if (!h) throw new NotFoundError(`${pack.key} is gone`, { digest: e.digest });
        return h;
      });
      if (check.status === 'missing') continue;
      report.scanned++;
      report.packed++;
      if (check.status === 'corrupt') {
        report.corrupt.push(e.digest);
        if (options.repair)
          report.repairFailed.push(`${e.digest}: packed in ${pack.key} with other blobs; left in place`);
        present.add(e.digest);
        continue;
      }
      await countIntact(store, e.digest, check.bytes, report, present, referenced);
    }
  }
  report.corrupt.sort();
  report.quarantined.sort();
  report.unreadablePacks.sort();
  const absent = [...referenced].filter((d) => !present.has(d));
  // Nothing is ever moved on S3 (a tombstone marks a blob in place): absent is missing.
  report.missing = (await Promise.all(absent.map(async (d) => ((await backend.hasBlob(d)) ? undefined : d))))
    .filter((d): d is string => d !== undefined)
    .sort();
  return report;
}

/** Deletes the corrupt version `etag` of blob `digest` and its index; a reason when it was not. */
async function removeCorrupt(backend: S3Backend, digest: string, etag: string): Promise<string | undefined> {
  try {
    const now = await backend.objects.head(backend.blobKey(digest));
    if (!now) return undefined;
    if (now.etag !== etag) return 'it was replaced by another copy while it was checked; left in place';
    await backend.objects.delete(backend.blobKey(digest));
    await backend.objects.delete(backend.indexKey(digest));
    return undefined;
  } catch (err) {
    const e = err as { code?: string; message?: string };
    return `${e.code ?? 'EDISK'}: ${e.message ?? String(err)}`;
  }
}
