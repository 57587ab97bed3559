/**
 * A multipart upload of a local file (store/s3/objects.ts, uploadFile,
 * above MULTIPART_THRESHOLD), read straight from the file.
 */
import { createReadStream } from 'node:fs';
import { s3Error, statusOf } from './errors.js';
import type { S3Objects } from './objects.js';

/** Part size of a multipart upload (S3's minimum is 5 MiB; 10,000 parts of 16 MiB is 156 GiB). */
const PART_BYTES = 16 * 1024 * 1024;
/** Parts in flight per upload. */
const PART_QUEUE = 4;
/** Tries of one part before the upload fails. */
const PART_ATTEMPTS = 3;

/**
 * A multipart upload read straight from the file: each part a ranged read
 * stream of known length, {@link PART_QUEUE} at a time, so memory is a few
 * stream buffers whatever the size (lib-storage's Upload would hold each
 * part in memory). A streamed part is not retried by the SDK, so each is
 * tried up to {@link PART_ATTEMPTS} times here; any other failure aborts
 * the upload, leaving no parts behind.
 */
export async function uploadParts(objects: S3Objects, key: string, path: string, size: number): Promise<string> {
  const {
    CreateMultipartUploadCommand,
    UploadPartCommand,
    CompleteMultipartUploadCommand,
    AbortMultipartUploadCommand,
  } = objects.sdk.client;
  const Bucket = objects.bucket;
  objects.requests.puts++;
  let uploadId: string | undefined;
  try {
    uploadId = (await objects.client.send(new CreateMultipartUploadCommand({ Bucket, Key: key }))).UploadId;
    const count = Math.ceil(size / PART_BYTES);
    const etags: string[] = new Array(count);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < count) {
        const i = next++;
        const start = i * PART_BYTES;
        const length = Math.min(PART_BYTES, size - start);
        for (let attempt = 1; ; attempt++) {
          objects.requests.puts++;
          try {
            const out = await objects.client.send(
              new UploadPartCommand({
                Bucket,
                Key: key,
                UploadId: uploadId,
                PartNumber: i + 1,
                ContentLength: length,
                Body: createReadStream(path, { start, end: start + length - 1, highWaterMark: 1024 * 1024 }),
              }),
            );
            etags[i] = out.ETag ?? '';
            break;
          } catch (err) {
            if (attempt >= PART_ATTEMPTS || statusOf(err) === 403 || statusOf(err) === 404) throw err;
          }
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(PART_QUEUE, count) }, worker));
    objects.requests.puts++;
    const done = await objects.client.send(
      new CompleteMultipartUploadCommand({
        Bucket,
        Key: key,
        UploadId: uploadId,
        MultipartUpload: { Parts: etags.map((ETag, i) => ({ ETag, PartNumber: i + 1 })) },
      }),
    );
    // Ceph's completion answer may carry no ETag the SDK reads: ask.
    return done.ETag || ((await objects.head(key))?.etag ?? '');
  } catch (err) {
    if (uploadId !== undefined) {
      await objects.client
        .send(new AbortMultipartUploadCommand({ Bucket, Key: key, UploadId: uploadId }))
        .catch(() => {});
    }
    throw s3Error(err, 'multipart upload', objects.bucket, key);
  }
}
