/**
 * The store suites' one fixture for both backends: a fresh directory store,
 * or a fresh S3 store (a new prefix in the run's bucket, a new local
 * directory), per test. Suites that exercise the Store interface run once
 * per backend:
 *
 * ```ts
 * describe.each(STORE_BACKENDS)('paged reads ($name)', ({ openStore }) => { ... openStore() ... });
 * ```
 *
 * Without an S3 service (test/support/s3.ts says why, once per run) the list
 * holds the directory backend only. Each S3 store's objects are deleted
 * after its test, and its local tmp/ must be empty then (nothing leaked).
 */
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { expect, onTestFinished } from 'vitest';
import { Store, type StoreOptions } from '../../store/store.js';
import { clientConfig, type S3Service, s3Service } from '../support/s3.js';
import { flipBit, tempDir, tempStore } from './helpers.js';

/** One way to open a store, with what its tests need to reach behind the interface. */
export interface StoreBackend {
  /** `directory` or `s3`, for test names. */
  readonly name: 'directory' | 's3';
  /** A new empty store for the current test, cleaned up when it finishes. */
  openStore(options?: StoreOptions): Promise<Store>;
  /** Flips one bit of stored blob `digest` at `position`, behind the store's back. */
  corruptBlob(store: Store, digest: string, position: number): Promise<void>;
  /** The stored bytes of (small) blob `digest`, read behind the store's back. */
  storedBytes(store: Store, digest: string): Promise<Buffer>;
  /** Replaces the stored bytes of (small) blob `digest` with `change(bytes)`, behind the store's back. */
  rewriteBlob(store: Store, digest: string, change: (bytes: Buffer) => Buffer): Promise<void>;
  /** Deletes blob `digest` behind the store's back. */
  removeBlob(store: Store, digest: string): Promise<void>;
  /** A new store instance on the same location (nothing remembered as verified). */
  reopen(store: Store): Promise<Store>;
}

const directory: StoreBackend = {
  name: 'directory',
  openStore: (options) => tempStore(options),
  corruptBlob: (store, digest, position) => flipBit(store.layout.blobPath(digest), position),
  storedBytes: (store, digest) => fsp.readFile(store.layout.blobPath(digest)),
  rewriteBlob: async (store, digest, change) => {
    const path = store.layout.blobPath(digest);
    // In place (same inode), as a disk or a stray writer would damage it.
    await fsp.writeFile(path, change(await fsp.readFile(path)));
  },
  removeBlob: (store, digest) => fsp.unlink(store.layout.blobPath(digest)),
  reopen: (store) => Store.open(store.root),
};

/** The S3Client settings of `s3`, for Store.open's `s3ClientConfig`. */
export function s3StoreConfig(s3: S3Service): Record<string, unknown> {
  const { endpoint, region, credentials } = s3;
  return clientConfig({ endpoint, region, bucket: s3.bucket, credentials }) as Record<string, unknown>;
}

/**
 * The environment of a `sluice` child process acting as host `host`: the
 * service's variables and a local directory of its own under `dir`.
 */
export function hostEnv(s3: S3Service, dir: string, host: string): Record<string, string | undefined> {
  return {
    ...s3.env,
    SLUICE_STORE_LOCAL: join(dir, host),
    // The CLI silences the SDK's Node.js version warning itself: stderr must stay empty.
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: undefined,
  };
}

/** Deletes every object under `prefix` in `bucket`. */
export async function deletePrefix(s3: S3Service, bucket: string, prefix: string): Promise<void> {
  let token: string | undefined;
  do {
    const page = await s3.client.send(
      new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }),
    );
    const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key as string }));
    if (keys.length > 0) await s3.client.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys } }));
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
}

/** The S3 backend of `s3`: each store under its own prefix of the run's bucket. */
export function s3Backend(s3: S3Service): StoreBackend {
  const storedBytes = async (store: Store, digest: string): Promise<Buffer> => {
    const got = await s3.client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: blobKey(store, digest) }));
    return Buffer.from(await (got.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
  };
  return {
    name: 's3',
    async openStore(options = {}) {
      const prefix = `t-${randomBytes(6).toString('hex')}`;
      const localDir = join(await tempDir('sluice-s3-local-'), 'local');
      const store = await Store.open(`s3://${s3.bucket}/${prefix}`, {
        localDir,
        s3ClientConfig: s3StoreConfig(s3),
        ...options,
      });
      onTestFinished(async () => {
        await store.close().catch(() => {});
        expect(await fsp.readdir(store.layout.tmp)).toEqual([]);
        await deletePrefix(s3, s3.bucket, `${prefix}/`);
      });
      return store;
    },
    async corruptBlob(store, digest, position) {
      // Small test blobs only: the object is rewritten whole.
      const body = await storedBytes(store, digest);
      body[position] = (body[position] ?? 0) ^ 1;
      await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: blobKey(store, digest), Body: body }));
    },
    storedBytes,
    async rewriteBlob(store, digest, change) {
      const body = change(await storedBytes(store, digest));
      await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: blobKey(store, digest), Body: body }));
    },
    async removeBlob(store, digest) {
      await s3.client.send(new DeleteObjectCommand({ Bucket: s3.bucket, Key: blobKey(store, digest) }));
    },
    async reopen(store) {
      const other = await Store.open(store.locator, {
        localDir: join(await tempDir('sluice-s3-local-'), 'local'),
        s3ClientConfig: s3StoreConfig(s3),
      });
      onTestFinished(async () => {
        await other.close().catch(() => {});
        expect(await fsp.readdir(other.layout.tmp)).toEqual([]);
      });
      return other;
    },
  };
}

/** The key of blob `digest` in S3 store `store` (store/s3/backend.ts). */
export function blobKey(store: Store, digest: string): string {
  if (store.location.kind !== 's3') throw new Error('not an S3 store');
  return `${store.location.prefix}/blobs/sha256/${digest.slice(0, 2)}/${digest.slice(2)}`;
}

const s3 = await s3Service();

/** The backends this run can test: the directory store always, the S3 store when a service is up. */
export const STORE_BACKENDS: readonly StoreBackend[] = s3 ? [directory, s3Backend(s3)] : [directory];
