/**
 * Two hosts on one S3 store for the session suites: engines (or bare
 * stores) on one new prefix of the run's bucket, each with its own local
 * directory, as two machines sharing a bucket would be.
 */
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { expect, onTestFinished } from 'vitest';
import { Engine } from '../../engine/index.js';
import type { RequestCounts } from '../../store/s3/objects.js';
import { Store } from '../../store/store.js';
import { deletePrefix, s3StoreConfig } from '../store/backends.js';
import { tempDir } from '../store/helpers.js';
import { bucketOf } from '../store/s3-gc-helpers.js';
import type { S3Service } from '../support/s3.js';

/** Two engines on one new prefix of the run's bucket, each with its own local directory (closed and deleted after the test). */
export async function twoHosts(
  s3: S3Service,
  bucket = s3.bucket,
): Promise<{ a: Engine; b: Engine; dir: string; prefix: string }> {
  const dir = await tempDir();
  const prefix = `rec-${randomBytes(6).toString('hex')}`;
  const engines: Engine[] = [];
  onTestFinished(async () => {
    for (const e of engines) await e.close();
    // A test's own bucket may be gone already (useTempBucket deletes it with its objects).
    await deletePrefix(s3, bucket, `${prefix}/`).catch((err: { name?: string }) => {
      if (err.name !== 'NoSuchBucket') throw err;
    });
  });
  const open = async (host: string) => {
    const saved = process.env.SLUICE_STORE_LOCAL;
    process.env.SLUICE_STORE_LOCAL = join(dir, host);
    try {
      const e = await Engine.open({ store: `s3://${bucket}/${prefix}`, cwd: dir });
      engines.push(e);
      return e;
    } finally {
      if (saved === undefined) delete process.env.SLUICE_STORE_LOCAL;
      else process.env.SLUICE_STORE_LOCAL = saved;
    }
  };
  return { a: await open('a'), b: await open('b'), dir, prefix };
}

/** Keys under `prefix` in the run's bucket. */
export async function keysUnder(s3: S3Service, prefix: string, bucket = s3.bucket): Promise<string[]> {
  const out = await s3.client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
  return (out.Contents ?? []).map((o) => o.Key as string);
}

/** Two stores (no engines) on one new prefix, with local directories `<dir>/a` and `<dir>/b`. */
export async function twoStores(s3: S3Service): Promise<{ a: Store; b: Store; dir: string; prefix: string }> {
  const dir = await tempDir();
  const prefix = `rec-${randomBytes(6).toString('hex')}`;
  const stores: Store[] = [];
  onTestFinished(async () => {
    for (const st of stores) await st.close();
    await deletePrefix(s3, s3.bucket, `${prefix}/`);
  });
  const open = async (host: string) => {
    const st = await Store.open(`s3://${s3.bucket}/${prefix}`, {
      localDir: join(dir, host),
      s3ClientConfig: s3StoreConfig(s3),
    });
    stores.push(st);
    return st;
  };
  return { a: await open('a'), b: await open('b'), dir, prefix };
}

/** The request counters of an S3 store. */
export function requestsOf(store: Store): RequestCounts {
  return bucketOf(store).objects.requests;
}

/** What `fn` cost in requests on `store`. */
export async function costOf(store: Store, fn: () => Promise<unknown>): Promise<Omit<RequestCounts, 'getBytes'>> {
  const before = { ...requestsOf(store) };
  await fn();
  const after = requestsOf(store);
  return {
    puts: after.puts - before.puts,
    gets: after.gets - before.gets,
    heads: after.heads - before.heads,
    lists: after.lists - before.lists,
    deletes: after.deletes - before.deletes,
  };
}

/** Both hosts' local temporaries are gone. */
export async function expectNoLeaks(dir: string): Promise<void> {
  for (const host of ['a', 'b']) expect(await fsp.readdir(join(dir, host, 'tmp'))).toEqual([]);
}
