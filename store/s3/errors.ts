/**
 * How an SDK failure becomes a sluice error (store/s3/objects.ts): a missing
 * key or bucket is ENOTFOUND; anything else (denied, throttled, unreachable,
 * 5xx) is EDISK, the store's "could not do I/O", with the service's code and
 * status in `details`, as a filesystem failure carries its errno.
 */
import { DiskError, NotFoundError, type SluiceError } from '../../engine/protocol/errors.js';

interface SdkErrorShape {
  name?: string;
  Code?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
}

/** The HTTP status of an SDK failure, when it has one. */
export function statusOf(err: unknown): number | undefined {
  return (err as SdkErrorShape | null)?.$metadata?.httpStatusCode;
}

/** The service's error code of an SDK failure (`NoSuchKey`, `PreconditionFailed`, ...). */
export function nameOf(err: unknown): string {
  const e = err as SdkErrorShape | null;
  return e?.name ?? e?.Code ?? e?.code ?? 'Error';
}

/** True when `err` says the key (or the bucket) does not exist. */
export function isNotFound(err: unknown): boolean {
  const name = nameOf(err);
  return name === 'NoSuchKey' || name === 'NotFound' || name === 'NoSuchBucket' || statusOf(err) === 404;
}

/** Maps an SDK failure of `op` on `key` to a sluice error (see the module comment). */
export function s3Error(err: unknown, op: string, bucket: string, key: string): SluiceError {
  const name = nameOf(err);
  const status = statusOf(err);
  const details = { bucket, key, s3: name, ...(status !== undefined ? { status } : {}) };
  const where = `s3://${bucket}/${key}`;
  if (name === 'NoSuchBucket') return new NotFoundError(`S3 bucket ${bucket} does not exist (${op} ${where})`, details);
  if (isNotFound(err)) return new NotFoundError(`${where} does not exist (${op})`, details);
  const message = (err as SdkErrorShape | null)?.message ?? String(err);
  return new DiskError(`S3 ${op} of ${where} failed: ${name}${status ? ` (HTTP ${status})` : ''}: ${message}`, details);
}
