/**
 * What the S3 GC suites share: two hosts on one store prefix, roots kept in
 * a set (a stand-in for session records: a digest "recorded" after a scan
 * is what that scan's re-check returns), and the bucket's GC objects
 * (leases, lock, tombstones) read behind the stores' backs.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { expect, onTestFinished } from 'vitest';
import type { S3Bucket } from '../../store/backend.js';
import type { CollectHooks } from '../../store/gc/collect.js';
import type { RootScan } from '../../store/gc/roots.js';
import { Store, type StoreOptions } from '../../store/store.js';
import type { S3Service } from '../support/s3.js';
import { s3Backend, s3StoreConfig } from './backends.js';
import { tempDir } from './helpers.js';

/** Roots held in memory: `record(d)` adds one; a scan sees what was recorded before it, its re-check what came after. */
export class SetRoots {
  private readonly recorded: string[] = [];

  record(...digests: string[]): void {
    this.recorded.push(...digests);
  }

  /** The hooks of a collection reading these roots. */
  hooks(): CollectHooks {
    return {
      roots: async (): Promise<RootScan> => {
        const at = this.recorded.length;
        return {
          digests: new Set(this.recorded),
          appended: async () => new Set(this.recorded.slice(at)),
          close: async () => {},
        };
      },
    };
  }
}

/** The bucket of the S3 store `store`. */
export function bucketOf(store: Store): S3Bucket {
  const bucket = store.backend.bucket;
  if (!bucket) throw new Error(`${store.locator} is not an S3 store`);
  return bucket;
}

/** Host A (a fresh store, cleaned up after the test) and host B on the same prefix, with its own local directory. */
export async function twoHosts(s3: S3Service, a: StoreOptions = {}, b: StoreOptions = {}): Promise<[Store, Store]> {
  const first = await s3Backend(s3).openStore(a);
  const second = await Store.open(first.locator, {
    localDir: join(await tempDir(), 'host-b'),
    s3ClientConfig: s3StoreConfig(s3),
    ...b,
  });
  // Whatever the test did, host B's temporaries are gone at its end.
  onTestFinished(async () => {
    await second.close().catch(() => {});
    expect(await fsp.readdir(second.layout.tmp)).toEqual([]);
  });
  return [first, second];
}

/** Keys under `<store prefix>/<under>` (leases/, gc/tombstones/, gc/lock). */
export async function keysUnder(s3: S3Service, store: Store, under: string): Promise<string[]> {
  const base = bucketOf(store).keyBase;
  const out: string[] = [];
  let token: string | undefined;
  do {
    const page = await s3.client.send(
      new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: `${base}${under}`, ContinuationToken: token }),
    );
    for (const o of page.Contents ?? []) out.push((o.Key as string).slice(base.length));
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return out;
}

/** Resolves once `cond()` holds, checking every few milliseconds (a wait, never a timing assertion). */
export async function until(cond: () => boolean | Promise<boolean>, what: string, limitMs = 60_000): Promise<void> {
  const started = performance.now();
  while (!(await cond())) {
    if (performance.now() - started > limitMs) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
