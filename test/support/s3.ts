/**
 * A real S3 service for the suites that need one, and the one line that says
 * why they did not run where there is none.
 *
 * Where the service comes from, in order:
 * 1. `SLUICE_TEST_S3_UNAVAILABLE` set (by .ci/run when it could not install
 *    or start Ceph): no service, that variable is the reason.
 * 2. `SLUICE_TEST_S3_ENDPOINT` set (by .ci/run, or by hand after
 *    `. DIR/s3.env`): that endpoint, with `SLUICE_TEST_S3_BUCKET` and the
 *    credentials and region in `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
 *    `AWS_REGION`.
 * 3. Otherwise the run's own Ceph, started by `.ci/s3-up.sh` for the first
 *    test file that asks and stopped at the end of the run; if the script
 *    cannot (packages missing, start failure), its reason.
 *
 * ```ts
 * const s3 = await s3Service();
 * describe.runIf(s3)('publication to S3', () => {
 *   const bucket = useTempBucket(() => s3!);
 *   it('...', async () => { await s3!.client.send(new PutObjectCommand({ Bucket: bucket(), ... })) });
 * });
 * ```
 */
import { randomBytes } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectsCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { afterEach, beforeEach } from 'vitest';
import { CEPH } from './ceph.js';
import { resolveService, type ServiceGate } from './service.js';

/** An S3 service the tests may use, and how to reach it. */
export interface S3Service {
  /** e.g. `http://127.0.0.1:40123`. */
  readonly endpoint: string;
  /** A bucket that exists, for tests that want one without creating their own. */
  readonly bucket: string;
  readonly region: string;
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
  /** The variables a child process (an engine host under test) needs to reach the service. */
  readonly env: Readonly<Record<string, string>>;
  /** A client set up as this service needs ({@link clientConfig}), shared by the test file. */
  readonly client: S3Client;
}

/**
 * What the AWS SDK v3 needs against Ceph RGW 16 (Pacific), measured:
 * - `forcePathStyle`: with a host name endpoint (`localhost`) the SDK
 *   otherwise asks for `BUCKET.localhost` (ENOTFOUND); an IP literal
 *   endpoint happens to get path style anyway.
 * - `requestChecksumCalculation: 'WHEN_REQUIRED'`: the default sends a
 *   streamed body as aws-chunked with a checksum trailer, which Pacific
 *   refuses (411 MissingContentLength); buffers pass either way.
 * - `responseChecksumValidation: 'WHEN_REQUIRED'`: not needed by the
 *   requests measured (RGW 16 returns no checksums), set so the SDK does not
 *   ask (`x-amz-checksum-mode`) for what the server does not have.
 */
export function clientConfig(s3: Omit<S3Service, 'client' | 'env'>): S3ClientConfig {
  return {
    endpoint: s3.endpoint,
    region: s3.region,
    credentials: { ...s3.credentials },
    forcePathStyle: true,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  };
}

const VARIABLES = [
  'SLUICE_TEST_S3_ENDPOINT',
  'SLUICE_TEST_S3_BUCKET',
  'AWS_ENDPOINT_URL_S3',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_REGION',
  'AWS_EC2_METADATA_DISABLED',
] as const;

function fromEnv(env: Record<string, string | undefined>): S3Service {
  const missing = ['SLUICE_TEST_S3_BUCKET', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY'].filter((k) => !env[k]);
  // A named endpoint without its keys is a broken setup, not a missing service: fail, do not skip.
  if (missing.length > 0) {
    throw new Error(`SLUICE_TEST_S3_ENDPOINT is set (${env.SLUICE_TEST_S3_ENDPOINT}) but ${missing.join(', ')} not`);
  }
  const base = {
    endpoint: env.SLUICE_TEST_S3_ENDPOINT!,
    bucket: env.SLUICE_TEST_S3_BUCKET!,
    region: env.AWS_REGION || 'us-east-1',
    credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID!, secretAccessKey: env.AWS_SECRET_ACCESS_KEY! },
  };
  const vars: Record<string, string> = {
    SLUICE_TEST_S3_ENDPOINT: base.endpoint,
    SLUICE_TEST_S3_BUCKET: base.bucket,
    AWS_ENDPOINT_URL_S3: base.endpoint,
    AWS_ACCESS_KEY_ID: base.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: base.credentials.secretAccessKey,
    AWS_REGION: base.region,
    AWS_EC2_METADATA_DISABLED: 'true',
  };
  return { ...base, env: vars, client: new S3Client(clientConfig(base)) };
}

/** How the S3 suites find their service. */
const GATE: ServiceGate<S3Service> = {
  suites: 'S3 suites',
  unavailable: 'SLUICE_TEST_S3_UNAVAILABLE',
  present: 'SLUICE_TEST_S3_ENDPOINT',
  fromEnv,
  // This test process now looks like CI's: code under test that reads the
  // standard variables (the SDK's default chain, a spawned engine host)
  // reaches the run's Ceph, never credentials a developer's shell had.
  adopt(env) {
    for (const k of VARIABLES) {
      if (env[k] !== undefined) process.env[k] = env[k];
    }
  },
};

function resolveS3(): Promise<S3Service | undefined> {
  // The SDK warns once per process that its 2027 releases want Node 22; it says nothing about the tests.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  return resolveService(CEPH, GATE);
}

let service: Promise<S3Service | undefined> | undefined;

/**
 * The S3 service of this run, or undefined (the reason is recorded and
 * printed once at the end of the run). Call it at the top level of a test
 * file, `const s3 = await s3Service()`, and gate with `describe.runIf(s3)`.
 * The first call in a process may take a few seconds (a Ceph start).
 */
export function s3Service(): Promise<S3Service | undefined> {
  service ??= resolveS3();
  return service;
}

/** A bucket name no other test uses (lowercase, DNS-safe, as S3 wants). */
export function uniqueBucketName(prefix = 'sluice-t'): string {
  return `${prefix}-${randomBytes(6).toString('hex')}`;
}

/** Creates bucket `name` on `s3`. */
export async function createBucket(s3: S3Service, name: string): Promise<void> {
  await s3.client.send(new CreateBucketCommand({ Bucket: name }));
}

/** Deletes every object and unfinished multipart upload in bucket `name`, then the bucket. */
export async function deleteBucket(s3: S3Service, name: string): Promise<void> {
  const { client } = s3;
  // Each page's uploads are aborted before the next list, so listing again from the start moves on.
  for (;;) {
    const page = await client.send(new ListMultipartUploadsCommand({ Bucket: name }));
    for (const u of page.Uploads ?? []) {
      await client.send(new AbortMultipartUploadCommand({ Bucket: name, Key: u.Key, UploadId: u.UploadId }));
    }
    if (!page.IsTruncated) break;
  }
  let token: string | undefined;
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket: name, ContinuationToken: token }));
    const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
    if (keys.length > 0) await client.send(new DeleteObjectsCommand({ Bucket: name, Delete: { Objects: keys } }));
    token = page.NextContinuationToken;
  } while (token);
  await client.send(new DeleteBucketCommand({ Bucket: name }));
}

/**
 * A fresh bucket for each test of the enclosing suite, emptied and deleted
 * after it. Returns a getter for the current test's bucket name. `s3` is a
 * getter because the suite is declared before the service is known to exist.
 */
export function useTempBucket(s3: () => S3Service): () => string {
  let name: string | undefined;
  beforeEach(async () => {
    name = uniqueBucketName();
    await createBucket(s3(), name);
  });
  afterEach(async () => {
    if (name !== undefined) await deleteBucket(s3(), name);
    name = undefined;
  });
  return () => {
    if (name === undefined) throw new Error('useTempBucket: no test is running');
    return name;
  };
}
