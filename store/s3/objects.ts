/**
 * The S3 requests a store makes, as typed errors and counted (docs/store.md,
 * "S3"). Path-style when the endpoint is overridden; checksums only where
 * required (Ceph Pacific refuses aws-chunked bodies with trailers).
 */
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import type { ListObjectsV2CommandOutput, S3Client } from '@aws-sdk/client-s3';
import { DiskError } from '../../engine/protocol/errors.js';
import { isNotFound, nameOf, s3Error, statusOf } from './errors.js';
import { uploadParts } from './multipart.js';
import type { S3Sdk } from './sdk.js';

/** Above this size a file is uploaded in parts (parallel, resumable per part) instead of one PUT. */
export const MULTIPART_THRESHOLD = 64 * 1024 * 1024;

/** What HEAD (or a listing) says about one object. */
export interface ObjectHead {
  readonly size: number;
  /** The ETag as sent (quoted): this version of the object. */
  readonly etag: string;
  readonly lastModified: Date | undefined;
}

/** One entry of a listing. */
export interface ListedObject {
  readonly key: string;
  readonly size: number;
  /** The ETag as listed (quoted). */
  readonly etag: string;
  readonly lastModified: Date | undefined;
}

/** A small object read whole ({@link S3Objects.getSmall}), with the server's clock at the reply. */
export interface SmallObject {
  readonly body: Buffer;
  readonly etag: string;
  readonly lastModified: Date | undefined;
  /** The newest reply's `Date`: a server time not in its future, by which expiries are judged. */
  readonly serverDate: Date | undefined;
}

/** Requests made so far, by kind (each SDK command is one request, each multipart part one PUT). */
export interface RequestCounts {
  puts: number;
  gets: number;
  heads: number;
  lists: number;
  deletes: number;
  /** Bytes received by GETs (what reads cost in transfer). */
  getBytes: number;
}

/** Options of {@link S3Objects.connect}. */
export interface S3ConnectOptions {
  /** Extra S3Client configuration, applied last (tests, or an SDK user's own credentials). */
  readonly clientConfig?: Record<string, unknown>;
  /** Environment read for the endpoint override. @default process.env */
  readonly env?: NodeJS.ProcessEnv;
}

const ignore = (): void => {};
const SILENT = { debug: ignore, info: ignore, warn: ignore, error: ignore, trace: ignore };

/** The objects of one bucket, through one client. */
export class S3Objects {
  /** Requests made through this instance. */
  readonly requests: RequestCounts = { puts: 0, gets: 0, heads: 0, lists: 0, deletes: 0, getBytes: 0 };
  /** The `Date` header of the newest reply (leases and the GC lock expire by the server's clock, never this host's). */
  private lastServerDate: Date | undefined;

  private constructor(
    /** The SDK's modules (its commands). */
    readonly sdk: S3Sdk,
    /** The SDK client (shared by every request of this store). */
    readonly client: S3Client,
    /** The bucket. */
    readonly bucket: string,
  ) {}

  /** A client for `bucket` from the standard chain (see the module comment). */
  static connect(sdk: S3Sdk, bucket: string, options: S3ConnectOptions = {}): S3Objects {
    const env = options.env ?? process.env;
    const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL;
    const config: Record<string, unknown> = {
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // Failures reach the caller as typed errors; the SDK's own logger would print some on the console.
      logger: SILENT,
    };
    if (endpoint) {
      config.endpoint = endpoint;
      config.forcePathStyle = true;
      // Services other than AWS ignore the region but the signer needs one.
      if (!env.AWS_REGION && !env.AWS_DEFAULT_REGION) config.region = 'us-east-1';
    }
    Object.assign(config, options.clientConfig);
    if (config.endpoint !== undefined && options.clientConfig?.forcePathStyle === undefined)
      config.forcePathStyle = true;
    const objects = new S3Objects(sdk, new sdk.client.S3Client(config), bucket);
    objects.client.middlewareStack.add(
      (next) => async (args) => {
        const out = await next(args);
        const date = (out.response as { headers?: Record<string, string> } | undefined)?.headers?.date;
        const at = date ? new Date(date) : undefined;
        if (at && !Number.isNaN(at.getTime()) && !(objects.lastServerDate && at < objects.lastServerDate))
          objects.lastServerDate = at;
        return out;
      },
      { step: 'deserialize', name: 'sluiceServerDate' },
    );
    return objects;
  }

  /** The server's clock at the newest reply so far (see {@link SmallObject.serverDate}). */
  get serverDate(): Date | undefined {
    return this.lastServerDate;
  }

  /** Compare-and-swap (`If-Match`) for leases and the GC lock; undefined on 412 (or 404 for absent). */
  putIfMatch(key: string, body: Uint8Array, etag: string): Promise<string | undefined> {
    // Ceph compares the ETag without its quotes: a quoted one never matches.
    return this.putBody(key, body, { IfMatch: etag.replace(/^"|"$/g, '') });
  }

  /** Replaces or creates `key` with `body`, unconditionally. Returns the ETag. */
  async put(key: string, body: Uint8Array): Promise<string> {
    return (await this.putBody(key, body, {})) ?? '';
  }

  /** All of the small object `key` (larger than `limit`: EDISK, never partly read), or undefined. */
  async getSmall(key: string, limit: number): Promise<SmallObject | undefined> {
    this.requests.gets++;
    try {
      const out = await this.client.send(new this.sdk.client.GetObjectCommand({ Bucket: this.bucket, Key: key }));
      if ((out.ContentLength ?? 0) > limit) {
        (out.Body as Readable | undefined)?.destroy();
        throw new DiskError(`s3://${this.bucket}/${key} is ${out.ContentLength} bytes, more than ${limit}`, {
          bucket: this.bucket,
          key,
          s3: 'TooLarge',
        });
      }
      const body = await readBody(out.Body as Readable | undefined, limit);
      this.requests.getBytes += body.length;
      return { body, etag: out.ETag ?? '', lastModified: out.LastModified, serverDate: this.lastServerDate };
    } catch (err) {
      if (err instanceof DiskError) throw err;
      if (isNotFound(err) && nameOf(err) !== 'NoSuchBucket') return undefined;
      throw s3Error(err, 'GET', this.bucket, key);
    }
  }

  /** Closes the client's connections. */
  destroy(): void {
    this.client.destroy();
  }

  /**
   * Create-once (`If-None-Match: *`). Undefined when already there (412) or
   * another conditional write is in progress (409): the caller looks.
   */
  putIfAbsent(key: string, body: Uint8Array): Promise<string | undefined> {
    return this.putBody(key, body, { IfNoneMatch: '*' });
  }

  /** Undefined when the condition failed (412, 404 for `If-Match` on an absent key, 409). */
  private async putBody(
    key: string,
    body: Uint8Array,
    condition: { IfNoneMatch?: string; IfMatch?: string },
  ): Promise<string | undefined> {
    this.requests.puts++;
    try {
      const out = await this.client.send(
        new this.sdk.client.PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ...condition }),
      );
      return out.ETag ?? '';
    } catch (err) {
      if (statusOf(err) === 412 || nameOf(err) === 'PreconditionFailed') return undefined;
      if (condition.IfMatch !== undefined && isNotFound(err) && nameOf(err) !== 'NoSuchBucket') return undefined;
      // AWS's answer to a conditional write racing another one (it asks for a retry): the caller looks again.
      if (nameOf(err) === 'ConditionalRequestConflict') return undefined;
      throw s3Error(err, 'PUT', this.bucket, key);
    }
  }

  /**
   * Streams the file at `path` to `key`: a create-once PUT, or multipart past
   * {@link MULTIPART_THRESHOLD} (not conditional on Ceph Pacific: two hosts
   * write the same bytes). `overwrite` heals a corrupt object. Undefined when there.
   */
  async uploadFile(key: string, path: string, size: number, overwrite = false): Promise<string | undefined> {
    if (size <= MULTIPART_THRESHOLD) {
      this.requests.puts++;
      try {
        const out = await this.client.send(
          new this.sdk.client.PutObjectCommand({
            Bucket: this.bucket,
            Key: key,
            Body: createReadStream(path),
            ContentLength: size,
            ...(overwrite ? {} : { IfNoneMatch: '*' }),
          }),
        );
        return out.ETag ?? '';
      } catch (err) {
        if (statusOf(err) === 412 || nameOf(err) === 'PreconditionFailed') return undefined;
        throw s3Error(err, 'PUT', this.bucket, key);
      }
    }
    return uploadParts(this, key, path, size);
  }

  /** Checks that the bucket answers: ENOTFOUND when missing, EDISK when refused or unreachable. */
  async checkBucket(): Promise<void> {
    this.requests.heads++;
    try {
      await this.client.send(new this.sdk.client.HeadBucketCommand({ Bucket: this.bucket }));
    } catch (err) {
      // HEAD has no body, so a missing bucket is a bare 404: name it.
      if (statusOf(err) === 404)
        throw s3Error({ name: 'NoSuchBucket', $metadata: { httpStatusCode: 404 } }, 'HEAD', this.bucket, '');
      throw s3Error(err, 'HEAD', this.bucket, '');
    }
  }

  /** HEAD of `key`, or undefined when it does not exist. */
  async head(key: string): Promise<ObjectHead | undefined> {
    this.requests.heads++;
    try {
      const out = await this.client.send(new this.sdk.client.HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { size: out.ContentLength ?? 0, etag: out.ETag ?? '', lastModified: out.LastModified };
    } catch (err) {
      if (isNotFound(err) && nameOf(err) !== 'NoSuchBucket') return undefined;
      throw s3Error(err, 'HEAD', this.bucket, key);
    }
  }

  /**
   * Bytes `[start, end)` of `key`, short only at the end. `etag` makes the
   * GET conditional, so a read never mixes two versions (EDISK).
   */
  async getRange(key: string, start: number, end: number, etag?: string): Promise<Buffer> {
    if (end <= start) return Buffer.alloc(0);
    this.requests.gets++;
    try {
      const out = await this.client.send(
        new this.sdk.client.GetObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Range: `bytes=${start}-${end - 1}`,
          // Ceph wants the ETag without its quotes.
          ...(etag ? { IfMatch: etag.replace(/^"|"$/g, '') } : {}),
        }),
      );
      // A server may ignore Range and send everything: fine from 0, else the read fails.
      if (start > 0 && !out.ContentRange?.startsWith(`bytes ${start}-`)) {
        (out.Body as Readable | undefined)?.destroy();
        throw new DiskError(
          `S3 GET of s3://${this.bucket}/${key} asked for bytes ${start}-${end - 1} and got ${out.ContentRange ? `bytes ${out.ContentRange}` : 'the whole object'}`,
          { bucket: this.bucket, key, s3: 'RangeIgnored', range: `${start}-${end - 1}` },
        );
      }
      const body = await readBody(out.Body as Readable | undefined, end - start);
      this.requests.getBytes += body.length;
      return body;
    } catch (err) {
      if (err instanceof DiskError) throw err;
      if (statusOf(err) === 416) return Buffer.alloc(0);
      throw s3Error(err, 'GET', this.bucket, key);
    }
  }

  /** Every object under `prefix` in key order (after `startAfter`), 1000 per request. */
  async *list(prefix: string, startAfter?: string): AsyncIterable<ListedObject> {
    let token: string | undefined;
    do {
      const page = await this.listPage(prefix, token, startAfter);
      for (const o of page.Contents ?? []) {
        if (o.Key !== undefined) {
          yield { key: o.Key, size: o.Size ?? 0, etag: o.ETag ?? '', lastModified: o.LastModified };
        }
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  /** Each distinct next segment under `prefix`, as a key prefix ending with `/`, in key order. */
  async *listPrefixes(prefix: string): AsyncIterable<string> {
    let token: string | undefined;
    do {
      const page = await this.listPage(prefix, token, undefined, '/');
      for (const p of page.CommonPrefixes ?? []) if (p.Prefix !== undefined) yield p.Prefix;
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  private async listPage(
    prefix: string,
    token: string | undefined,
    startAfter: string | undefined,
    delimiter?: string,
  ): Promise<ListObjectsV2CommandOutput> {
    this.requests.lists++;
    try {
      return await this.client.send(
        new this.sdk.client.ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: prefix,
          ContinuationToken: token,
          ...(startAfter !== undefined && token === undefined ? { StartAfter: startAfter } : {}),
          ...(delimiter !== undefined ? { Delimiter: delimiter } : {}),
        }),
      );
    } catch (err) {
      throw s3Error(err, 'LIST', this.bucket, prefix);
    }
  }

  /** Deletes `key`; deleting a key that is not there succeeds (as S3 itself answers). */
  async delete(key: string): Promise<void> {
    this.requests.deletes++;
    try {
      await this.client.send(new this.sdk.client.DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch (err) {
      if (isNotFound(err) && nameOf(err) !== 'NoSuchBucket') return;
      throw s3Error(err, 'DELETE', this.bucket, key);
    }
  }
}

/** Reads a response body of at most `limit` bytes into one buffer, without growing copies. */
async function readBody(body: Readable | undefined, limit: number): Promise<Buffer> {
  if (!body) return Buffer.alloc(0);
  const out = Buffer.allocUnsafe(limit);
  let got = 0;
  for await (const chunk of body as AsyncIterable<Uint8Array>) {
    const n = Math.min(chunk.length, limit - got);
    out.set(chunk.subarray(0, n), got);
    got += n;
    if (got >= limit) break;
  }
  if (got >= limit) body.destroy();
  return got === limit ? out : out.subarray(0, got);
}
