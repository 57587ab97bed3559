/** The sessions of an S3 store: which exist (a key prefix with a batch) and deleting one. */
import { promises as fsp } from 'node:fs';
import type { Store } from '../../store/store.js';
import { toSluiceError } from '../protocol/errors.js';
import { type S3Records, seqOfKey, sessionPrefix, sessionsPrefix } from './s3-batch.js';
import { dropMirror, noSuchSession } from './s3-mirror.js';
import { isSessionId, sessionDir } from './session-id.js';

/** Ids of the sessions in the bucket, sorted; a listing that fails is EDISK, never an empty list (the collector builds its roots from it). */
export async function listS3SessionIds(s3: S3Records): Promise<string[]> {
  const prefix = sessionsPrefix(s3);
  const ids: string[] = [];
  for await (const p of s3.objects.listPrefixes(prefix)) {
    const id = p.slice(prefix.length, -1);
    if (isSessionId(id)) ids.push(id);
  }
  return ids.sort();
}

/**
 * Deletes session `id`'s batch objects, the last first, so that a reader
 * meanwhile sees a prefix of its batches, never a hole; then this host's
 * mirror. ENOTFOUND when the session has no batch.
 */
export async function deleteS3Session(store: Store, s3: S3Records, id: string): Promise<void> {
  const prefix = sessionPrefix(s3, id);
  const keys: string[] = [];
  for await (const o of s3.objects.list(prefix)) if (seqOfKey(prefix, o.key) !== undefined) keys.push(o.key);
  if (keys.length === 0) throw noSuchSession(id);
  for (const key of keys.reverse()) await s3.objects.delete(key);
  dropMirror(store, id);
  try {
    await fsp.rm(sessionDir(store.layout, id), { recursive: true, force: true });
  } catch (err) {
    throw toSluiceError(err, 'EDISK');
  }
}
