/**
 * The S3 object layer (store/s3/objects.ts) against a real Ceph RGW:
 * create-once puts, multipart uploads from a file, ranged and conditional
 * GETs, paged listings, deletes, and the typed errors each maps to.
 */
import { createHash } from 'node:crypto';
import { createWriteStream, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { ListMultipartUploadsCommand } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../engine/protocol/errors.js';
import { MULTIPART_THRESHOLD, S3Objects } from '../../store/s3/objects.js';
import { loadS3Sdk } from '../../store/s3/sdk.js';
import { s3Service, useTempBucket } from '../support/s3.js';
import { s3StoreConfig } from './backends.js';
import { tempDir } from './helpers.js';

const s3 = await s3Service();

async function objectsOf(bucket: string, extra: Record<string, unknown> = {}): Promise<S3Objects> {
  const sdk = await loadS3Sdk();
  return S3Objects.connect(sdk, bucket, { clientConfig: { ...s3StoreConfig(s3!), ...extra }, env: {} });
}

/** Writes `bytes` of a deterministic pattern to a new file, 1 MiB at a time; returns its path and SHA-256. */
async function patternFile(bytes: number): Promise<{ path: string; sha: string }> {
  const path = join(await tempDir(), 'big');
  const out = createWriteStream(path);
  const hash = createHash('sha256');
  const block = Buffer.alloc(1024 * 1024);
  for (let at = 0; at < bytes; at += block.length) {
    const n = Math.min(block.length, bytes - at);
    for (let i = 0; i < n; i += 8) block.writeDoubleLE(at + i, i);
    const chunk = block.subarray(0, n);
    hash.update(chunk);
    if (!out.write(Buffer.from(chunk))) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  return { path, sha: hash.digest('hex') };
}

async function caught(p: Promise<unknown>): Promise<SluiceError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SluiceError);
  return err as SluiceError;
}

describe.runIf(s3)('S3 object layer', () => {
  const bucket = useTempBucket(() => s3!);

  it('a create-once put creates the object once; the second is a success that changes nothing', async () => {
    const o = await objectsOf(bucket());
    try {
      const etag = await o.putIfAbsent('k/one', Buffer.from('first'));
      expect(etag).toMatch(/^"[0-9a-f]{32}"$/);
      expect(await o.putIfAbsent('k/one', Buffer.from('second'))).toBeUndefined();
      expect((await o.getRange('k/one', 0, 100)).toString()).toBe('first');
      expect(await o.head('k/one')).toMatchObject({ size: 5, etag });
      expect(o.requests).toMatchObject({ puts: 2, gets: 1, heads: 1 });
    } finally {
      o.destroy();
    }
  });

  it('uploads a file above the multipart threshold in parts, leaving no upload behind, and reads any range of it', async () => {
    const size = MULTIPART_THRESHOLD + 5 * 1024 * 1024 + 3;
    const { path, sha } = await patternFile(size);
    const o = await objectsOf(bucket());
    try {
      const etag = await o.uploadFile('big', path, size);
      // A multipart ETag is the MD5 of the parts' MD5s with the part count.
      expect(etag).toMatch(/^"[0-9a-f]{32}-5"$/);
      expect(o.requests.puts).toBe(2 + 5);
      expect(await o.head('big')).toMatchObject({ size, etag });
      const tail = await o.getRange('big', size - 11, size + 100, etag);
      const fh = await fsp.open(path);
      const want = Buffer.alloc(11);
      await fh.read(want, 0, 11, size - 11);
      await fh.close();
      expect(tail.equals(want)).toBe(true);
      // The whole object hashes to the file's digest, read back in ranges.
      const hash = createHash('sha256');
      for (let at = 0; at < size; at += 16 * 1024 * 1024)
        hash.update(await o.getRange('big', at, Math.min(size, at + 16 * 1024 * 1024)));
      expect(hash.digest('hex')).toBe(sha);
      const uploads = await s3!.client.send(new ListMultipartUploadsCommand({ Bucket: bucket() }));
      expect(uploads.Uploads ?? []).toEqual([]);
    } finally {
      o.destroy();
    }
  });

  it('uploads a small file with one create-once PUT', async () => {
    const { path } = await patternFile(1000);
    const o = await objectsOf(bucket());
    try {
      expect(await o.uploadFile('small', path, 1000)).toMatch(/^"[0-9a-f]{32}"$/);
      expect(await o.uploadFile('small', path, 1000)).toBeUndefined();
      expect(o.requests.puts).toBe(2);
      expect((await o.getRange('small', 0, 2000)).length).toBe(1000);
    } finally {
      o.destroy();
    }
  });

  it('a missing key is undefined to HEAD and ENOTFOUND to GET; deleting it succeeds', async () => {
    const o = await objectsOf(bucket());
    try {
      expect(await o.head('absent')).toBeUndefined();
      const err = await caught(o.getRange('absent', 0, 10));
      expect(err.code).toBe('ENOTFOUND');
      expect(err.details).toMatchObject({ bucket: bucket(), key: 'absent', s3: 'NoSuchKey', status: 404 });
      await o.delete('absent');
      await o.putIfAbsent('present', Buffer.from('x'));
      await o.delete('present');
      expect(await o.head('present')).toBeUndefined();
    } finally {
      o.destroy();
    }
  });

  it('a GET conditional on an ETag fails with EDISK once the object was replaced', async () => {
    const o = await objectsOf(bucket());
    try {
      const etag = (await o.putIfAbsent('v', Buffer.from('one'))) as string;
      await o.delete('v');
      await o.putIfAbsent('v', Buffer.from('two'));
      const err = await caught(o.getRange('v', 0, 3, etag));
      expect(err.code).toBe('EDISK');
      expect(err.details).toMatchObject({ status: 412 });
    } finally {
      o.destroy();
    }
  });

  it('lists past one page of 1000 keys, in key order, one request per page', async () => {
    const o = await objectsOf(bucket());
    try {
      const keys = Array.from({ length: 1003 }, (_, i) => `p/${String(i).padStart(5, '0')}`);
      for (let i = 0; i < keys.length; i += 50) {
        await Promise.all(keys.slice(i, i + 50).map((k) => o.putIfAbsent(k, Buffer.from(k))));
      }
      await o.putIfAbsent('q/outside', Buffer.from('x'));
      const listed: string[] = [];
      for await (const obj of o.list('p/')) {
        listed.push(obj.key);
        expect(obj.size).toBe(7);
      }
      expect(listed).toEqual(keys);
      expect(o.requests.lists).toBe(2);
    } finally {
      o.destroy();
    }
  });

  it('a missing bucket is ENOTFOUND and refused credentials are EDISK with the status', async () => {
    const missing = await objectsOf(`${bucket()}-absent`);
    const denied = await objectsOf(bucket(), { credentials: { accessKeyId: 'NOPE', secretAccessKey: 'nope' } });
    try {
      const a = await caught(missing.checkBucket());
      expect(a.code).toBe('ENOTFOUND');
      expect(a.details).toMatchObject({ s3: 'NoSuchBucket' });
      const b = await caught(denied.putIfAbsent('k', Buffer.from('x')));
      expect(b.code).toBe('EDISK');
      expect(b.details).toMatchObject({ status: 403 });
      await expect(denied.checkBucket()).rejects.toMatchObject({ code: 'EDISK' });
    } finally {
      missing.destroy();
      denied.destroy();
    }
  });
});
