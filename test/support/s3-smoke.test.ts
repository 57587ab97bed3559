/**
 * The S3 test harness against the real service (test/support/s3.ts): the
 * requests the S3 store will rely on (issue 23) behave as it assumes, with
 * the client configuration the helper gives.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { describe, expect, it } from 'vitest';
import { createBucket, deleteBucket, type S3Service, s3Service, uniqueBucketName, useTempBucket } from './s3.js';

const s3 = await s3Service();
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The HTTP status an S3 request failed with (the test fails if it did not fail). */
async function statusOf(p: Promise<unknown>): Promise<number | undefined> {
  try {
    await p;
  } catch (e) {
    if (e instanceof S3ServiceException) return e.$metadata.httpStatusCode;
    throw e;
  }
  throw new Error('the request succeeded');
}

/** `size` bytes of a deterministic pattern, made as they are read: the test holds no whole copy. */
function generated(size: number, chunk = 1 << 20): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= size) return void this.push(null);
      const n = Math.min(chunk, size - sent);
      const b = Buffer.alloc(n);
      for (let i = 0; i < n; i += 4096) b.writeUInt32BE((sent + i) >>> 0, i);
      sent += n;
      this.push(b);
    },
  });
}

async function sha256Of(stream: AsyncIterable<Uint8Array>): Promise<{ digest: string; bytes: number }> {
  const h = createHash('sha256');
  let bytes = 0;
  for await (const b of stream) {
    h.update(b);
    bytes += b.length;
  }
  return { digest: h.digest('hex'), bytes };
}

async function text(s3: S3Service, Bucket: string, Key: string, Range?: string): Promise<string> {
  const got = await s3.client.send(new GetObjectCommand({ Bucket, Key, Range }));
  return got.Body!.transformToString();
}

describe.runIf(s3)('the S3 test service (Ceph RGW)', () => {
  const service = () => s3!;
  const bucket = useTempBucket(service);

  it('creates an object once: a second create-once put gets 412 and the first body stays', async () => {
    const put = (body: string) =>
      service().client.send(new PutObjectCommand({ Bucket: bucket(), Key: 'blob', Body: body, IfNoneMatch: '*' }));
    await put('first');
    expect(await statusOf(put('second'))).toBe(412);
    expect(await text(service(), bucket(), 'blob')).toBe('first');
  });

  it('returns exactly the requested byte range with 206 and its Content-Range', async () => {
    await service().client.send(new PutObjectCommand({ Bucket: bucket(), Key: 'r', Body: '0123456789abcdef' }));
    const got = await service().client.send(new GetObjectCommand({ Bucket: bucket(), Key: 'r', Range: 'bytes=10-13' }));
    expect(got.$metadata.httpStatusCode).toBe(206);
    expect(got.ContentRange).toBe('bytes 10-13/16');
    expect(await got.Body!.transformToString()).toBe('abcd');
  });

  it('lists keys by prefix and delimiter, page by page with continuation tokens', async () => {
    const keys = ['blobs/aa/1', 'blobs/aa/2', 'blobs/bb/3', 'blobs/cc', 'other'];
    for (const Key of keys) await service().client.send(new PutObjectCommand({ Bucket: bucket(), Key, Body: Key }));
    const grouped = await service().client.send(
      new ListObjectsV2Command({ Bucket: bucket(), Prefix: 'blobs/', Delimiter: '/' }),
    );
    expect(grouped.CommonPrefixes?.map((p) => p.Prefix)).toEqual(['blobs/aa/', 'blobs/bb/']);
    expect(grouped.Contents?.map((o) => o.Key)).toEqual(['blobs/cc']);
    const paged: string[] = [];
    let token: string | undefined;
    do {
      const page = await service().client.send(
        new ListObjectsV2Command({ Bucket: bucket(), Prefix: 'blobs/', MaxKeys: 2, ContinuationToken: token }),
      );
      expect(page.Contents!.length).toBeLessThanOrEqual(2);
      paged.push(...page.Contents!.map((o) => o.Key!));
      token = page.NextContinuationToken;
    } while (token);
    expect(paged).toEqual(keys.slice(0, 4));
  });

  it('stores a 20 MiB body of unknown length as a multipart upload and reads it back byte for byte', async () => {
    const size = 20 * 1024 * 1024 + 12_345;
    const expected = await sha256Of(generated(size));
    const upload = new Upload({
      client: service().client,
      params: { Bucket: bucket(), Key: 'large', Body: generated(size) },
      partSize: 5 * 1024 * 1024,
      queueSize: 2,
    });
    await upload.done();
    const head = await service().client.send(new HeadObjectCommand({ Bucket: bucket(), Key: 'large' }));
    expect(head.ContentLength).toBe(size);
    // A multipart object's ETag ends in -<number of parts>.
    expect(head.ETag).toMatch(/-5"$/);
    const got = await service().client.send(new GetObjectCommand({ Bucket: bucket(), Key: 'large' }));
    expect(await sha256Of(got.Body as AsyncIterable<Uint8Array>)).toEqual(expected);
  });

  it('deletes an object: reading it afterwards is 404 NoSuchKey', async () => {
    await service().client.send(new PutObjectCommand({ Bucket: bucket(), Key: 'gone', Body: 'x' }));
    await service().client.send(new DeleteObjectCommand({ Bucket: bucket(), Key: 'gone' }));
    expect(await statusOf(service().client.send(new HeadObjectCommand({ Bucket: bucket(), Key: 'gone' })))).toBe(404);
  });

  it('deletes a bucket with its objects and unfinished uploads: it no longer exists', async () => {
    const name = uniqueBucketName();
    await createBucket(service(), name);
    await service().client.send(new PutObjectCommand({ Bucket: name, Key: 'a', Body: 'a' }));
    const abandoned = new Upload({
      client: service().client,
      params: { Bucket: name, Key: 'half', Body: generated(12 * 1024 * 1024) },
      partSize: 5 * 1024 * 1024,
      leavePartsOnError: true,
    });
    // Stop it once a part is in: the upload stays open on the server.
    abandoned.on('httpUploadProgress', (p) => {
      if ((p.loaded ?? 0) >= 5 * 1024 * 1024) void abandoned.abort();
    });
    await abandoned.done().catch(() => undefined);
    const open = await service().client.send(new ListMultipartUploadsCommand({ Bucket: name }));
    expect(open.Uploads?.map((u) => u.Key)).toEqual(['half']);
    await deleteBucket(service(), name);
    expect(await statusOf(service().client.send(new HeadBucketCommand({ Bucket: name })))).toBe(404);
  });

  it('reaches a child process through the standard AWS variables alone', async () => {
    const program = `
      import { S3Client, GetObjectCommand } from '@aws-sdk/client-s3';
      const c = new S3Client({ forcePathStyle: true, requestChecksumCalculation: 'WHEN_REQUIRED' });
      const o = await c.send(new GetObjectCommand({ Bucket: process.argv[1], Key: 'k' }));
      process.stdout.write(await o.Body.transformToString());`;
    await service().client.send(new PutObjectCommand({ Bucket: bucket(), Key: 'k', Body: 'from the parent' }));
    const env = { PATH: process.env.PATH ?? '', ...service().env };
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        ['--input-type=module', '-e', program, bucket()],
        { cwd: ROOT, env, timeout: 30_000 },
        (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)),
      ),
    );
    expect(out).toBe('from the parent');
  });
});
