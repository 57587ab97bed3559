/**
 * Garbage collection of an S3 store across hosts, against a real Ceph RGW:
 * host B collects while host A publishes, pins (its lease) and records
 * (roots kept in a set, as the sessions would keep them). What is
 * referenced, leased or young stays; the rest goes; a publisher
 * deduplicating at any step of the collection never ends with a referenced
 * blob missing; one collector at a time; a dead collector's tombstones and
 * a dead host's lease are reclaimed without losing what they named.
 */

import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { GcOptions, GcStep } from '../../store/gc/collect.js';
import { encodeManifest } from '../../store/manifest.js';
import { readGcLock, S3GcLock } from '../../store/s3/gc-lock.js';
import { tombstoneKey } from '../../store/s3/tombstones.js';
import { Store } from '../../store/store.js';
import { s3Service } from '../support/s3.js';
import { s3Backend } from './backends.js';
import { tempDir } from './helpers.js';
import { bucketOf, keysUnder, SetRoots, twoHosts, until } from './s3-gc-helpers.js';

// These tests count, damage or delete blob objects: every blob gets an object of its own here (packed
// blobs on S3 are tested in test/store/s3-packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

const s3 = await s3Service();

/**
 * Each step, and how the publisher's blob survives it: never a candidate (its lease or record was read
 * first), a candidate kept by the re-check (`restored`), or deleted while the publisher waited on its
 * tombstone and uploaded again (`reuploaded`).
 */
const STEPS: ReadonlyArray<[GcStep, 'kept' | 'restored' | 'reuploaded']> = [
  ['listed', 'kept'],
  ['pins', 'kept'],
  ['roots', 'restored'],
  ['marked', 'restored'],
  ['tombstone', 'restored'],
  ['recheck', 'restored'],
  ['relisted', 'reuploaded'],
  ['unlink', 'reuploaded'],
];

/** A collection of `store` reading `roots`. */
function collect(store: Store, roots: SetRoots, options: GcOptions = {}) {
  return store.backend.collect(roots.hooks(), { graceMs: 0, ...options });
}

/** Nothing of a collection is left in the bucket: no tombstone, no lock. */
async function expectNoCollectorLeft(store: Store): Promise<void> {
  expect(await keysUnder(s3!, store, 'gc/')).toEqual([]);
}

describe.runIf(s3)('GC of an S3 store across hosts', () => {
  it('removes an unreferenced blob and keeps referenced, leased, young and manifest-referenced ones', async () => {
    const [a, b] = await twoHosts(s3!);
    try {
      const roots = new SetRoots();
      const garbage = await a.publishBytes('garbage\n');
      const recorded = await a.publishBytes('recorded\n');
      roots.record(recorded.digest);
      const pin = await a.pin();
      const leased = await a.publishBytes('leased\n', undefined, pin);
      const stream = await a.publishBytes('a stream\n');
      const manifest = await a.publishBytes(
        encodeManifest([{ name: 'stdout', digest: stream.digest, bytes: stream.bytes, lines: stream.lines }]),
      );
      roots.record(manifest.digest);

      const report = await collect(b, roots);
      expect(report).toMatchObject({ scanned: 5, removed: 1, kept: 4, roots: 2, pinned: 1, young: 0 });
      expect(await b.hasBlob(garbage.digest)).toBe(false);
      for (const d of [recorded, leased, stream, manifest]) expect(await b.hasBlob(d.digest)).toBe(true);
      expect((await b.readPage(`artifact://${stream.digest}`)).content).toBe('a stream\n');

      // Young by the server's clock: a grace period keeps what an hour ago had not been written.
      const young = await a.publishBytes('young\n');
      const graced = await collect(b, roots, { graceMs: 3_600_000 });
      expect(graced).toMatchObject({ removed: 0, young: 5 });
      expect(await b.hasBlob(young.digest)).toBe(true);
      await pin.release();
      // Closed holding nothing: its lease goes (deleted before the store's client is).
      expect(await keysUnder(s3!, a, 'leases/')).toHaveLength(1);
      await a.close();
      expect(await keysUnder(s3!, a, 'leases/')).toEqual([]);
      await expectNoCollectorLeft(b);
    } finally {
      await b.close();
    }
  });

  it('lease timing that cannot work is EBADOPTION before anything is opened or created', async () => {
    const dir = await tempDir();
    for (const lease of [{ ttlMs: 1000, renewMs: 500 }, { ttlMs: 0 }, { ttlMs: 1.5 }]) {
      await expect(
        Store.open(`s3://${s3!.bucket}/never`, { localDir: join(dir, 'local'), lease }),
      ).rejects.toMatchObject({ code: 'EBADOPTION' });
    }
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it('a dry run reports what it would remove and changes nothing', async () => {
    const [a, b] = await twoHosts(s3!);
    try {
      const garbage = await a.publishBytes('garbage\n');
      const report = await collect(b, new SetRoots(), { dryRun: true });
      expect(report).toMatchObject({ dryRun: true, scanned: 1, removed: 1, bytesFreed: garbage.bytes });
      expect(await b.hasBlob(garbage.digest)).toBe(true);
      await expectNoCollectorLeft(b);
    } finally {
      await b.close();
    }
  });

  for (const [at, how] of STEPS) {
    it(`a publisher deduplicating on A when B's collection is at "${at}" never loses its referenced blob (${how})`, async () => {
      const [a, b] = await twoHosts(s3!);
      try {
        const roots = new SetRoots();
        // Garbage B will take for a candidate, and that A publishes again (a dedup) mid-collection.
        const old = await a.publishBytes(`shared content at ${at}\n`);
        const other = await a.publishBytes(`plain garbage at ${at}\n`);
        let publishing: Promise<void> | undefined;
        let deduplicated: boolean | undefined;
        let ended = false;
        const requests = bucketOf(a).objects.requests;
        const report = await collect(b, roots, {
          onStep: async (s) => {
            if (s !== at || publishing) return;
            const before = requests.gets;
            publishing = (async () => {
              const pin = await a.pin();
              try {
                const again = await a.publishBytes(`shared content at ${at}\n`, undefined, pin);
                expect(again.digest).toBe(old.digest);
                deduplicated = again.deduplicated;
                // Recorded while pinned, then released: the order a call keeps.
                roots.record(again.digest);
              } finally {
                await pin.release();
                ended = true;
              }
            })();
            // Until the publish ended, or it waits on B's tombstone (it has read it: a GET).
            await until(() => ended || requests.gets > before, 'the publisher to finish or wait');
          },
        });
        await publishing;
        expect({ removed: report.removed, restored: report.restored, deduplicated }).toEqual(
          how === 'kept'
            ? { removed: 1, restored: 0, deduplicated: true }
            : how === 'restored'
              ? { removed: 1, restored: 1, deduplicated: true }
              : { removed: 2, restored: 0, deduplicated: false },
        );
        expect(await b.hasBlob(other.digest)).toBe(false);
        expect(await a.hasBlob(old.digest)).toBe(true);
        expect((await b.readPage(`artifact://${old.digest}`)).content).toBe(`shared content at ${at}\n`);
        // The next collection keeps it: it is recorded.
        expect((await collect(b, roots)).removed).toBe(0);
        expect(await b.hasBlob(old.digest)).toBe(true);
        await expectNoCollectorLeft(b);
      } finally {
        await b.close();
      }
    });
  }

  it('two collectors at once: exactly one holds the lock, the other fails ETIMEOUT having removed nothing', async () => {
    const [a, b] = await twoHosts(s3!);
    try {
      const garbage = await a.publishBytes('garbage\n');
      let second: unknown;
      const report = await collect(b, new SetRoots(), {
        onStep: async (s) => {
          if (s !== 'listed') return;
          second = await collect(a, new SetRoots(), { lockTimeoutMs: 0 }).catch((err: unknown) => err);
        },
      });
      expect(second).toMatchObject({ code: 'ETIMEOUT' });
      expect(report.removed).toBe(1);
      expect(await a.hasBlob(garbage.digest)).toBe(false);
      await expectNoCollectorLeft(b);
    } finally {
      await b.close();
    }
  });

  it('a collector whose lock was taken over stops before deleting anything', async () => {
    const [a, b] = await twoHosts(s3!);
    try {
      const garbage = await a.publishBytes('garbage\n');
      const backend = bucketOf(b);
      await expect(
        collect(b, new SetRoots(), {
          lockTtlMs: 1000,
          onStep: async (s) => {
            if (s !== 'recheck') return;
            // B stalls past its lock's TTL (server clock) and A's collection takes the lock over.
            await until(async () => {
              const held = await readGcLock(backend.objects, backend.keyBase);
              return held?.expired === true;
            }, 'the lock to expire');
            const taken = await S3GcLock.acquire(bucketOf(a).objects, bucketOf(a).keyBase, 60_000, 0);
            await taken.release();
          },
        }),
      ).rejects.toMatchObject({ code: 'ETIMEOUT', details: { s3: 'LockLost' } });
      expect(await a.hasBlob(garbage.digest)).toBe(true);
      // Its tombstones stay for the next collection to clear, which then collects normally.
      expect(await keysUnder(s3!, b, 'gc/tombstones/')).toHaveLength(1);
      const next = await collect(a, new SetRoots());
      expect(next).toMatchObject({ trashRecovered: 1, removed: 1 });
      await expectNoCollectorLeft(a);
    } finally {
      await b.close();
    }
  });

  it('a live lease keeps its digests; an expired one is reclaimed and its digests become collectable', async () => {
    const lease = { ttlMs: 1500, renewMs: 300 };
    const [a, b] = await twoHosts(s3!, { lease });
    try {
      const roots = new SetRoots();
      const pin = await a.pin();
      const held = await a.publishBytes('held by a lease\n', undefined, pin);
      // A renews while B collects: kept, whatever the TTL.
      const live = await collect(b, roots);
      expect(live).toMatchObject({ pinned: 1, removed: 0, pinsReclaimed: 0 });
      expect(await keysUnder(s3!, a, 'leases/')).toHaveLength(1);
      // A stops renewing with the pin held (as a host that died holding it): its lease is left to expire.
      await a.close();
      expect(await keysUnder(s3!, a, 'leases/')).toHaveLength(1);
      let report = await collect(b, roots);
      await until(async () => {
        if (report.pinsReclaimed > 0) return true;
        report = await collect(b, roots);
        return report.pinsReclaimed > 0;
      }, 'the lease to expire by the server clock');
      expect(report).toMatchObject({ pinsReclaimed: 1, removed: 1, pinned: 0 });
      expect(await b.hasBlob(held.digest)).toBe(false);
      expect(await keysUnder(s3!, b, 'leases/')).toEqual([]);
      await expectNoCollectorLeft(b);
    } finally {
      await b.close();
    }
  });

  it("a dead collector's tombstones are cleared by the next one and nothing they named is lost", async () => {
    const [a, b] = await twoHosts(s3!, { lease: { ttlMs: 60_000, renewMs: 10_000 } });
    try {
      const roots = new SetRoots();
      const recorded = await a.publishBytes('recorded\n');
      roots.record(recorded.digest);
      const wanted = await a.publishBytes('published again\n');
      const backend = bucketOf(b);
      // What a collector killed after tombstoning leaves: its lock (1 s TTL) and its tombstones.
      const dead = await S3GcLock.acquire(backend.objects, backend.keyBase, 1000, 0);
      for (const d of [recorded.digest, wanted.digest]) {
        await backend.objects.put(tombstoneKey(backend.keyBase, d), Buffer.from(`${dead.id}\n`));
      }
      // A publisher finding a tombstone waits until the lock expires (server clock), breaks it, and dedups.
      const pin = await a.pin();
      const again = await a.publishBytes('published again\n', undefined, pin);
      expect(again).toMatchObject({ digest: wanted.digest, deduplicated: true });
      roots.record(again.digest);
      await pin.release();
      const report = await collect(b, roots);
      expect(report).toMatchObject({ trashRecovered: 2, removed: 0 });
      expect(await b.hasBlob(recorded.digest)).toBe(true);
      expect(await b.hasBlob(wanted.digest)).toBe(true);
      await expectNoCollectorLeft(b);
    } finally {
      await b.close();
    }
  });

  it('verify hashes every object, reports a corrupt one and a missing reference; --repair deletes the corrupt version', async () => {
    const [a, b] = await twoHosts(s3!);
    try {
      const good = await a.publishBytes('good\n');
      const bad = await a.publishBytes('will be damaged\n');
      const absent = 'e'.repeat(64);
      const manifest = await a.publishBytes(encodeManifest([{ name: 'stdout', digest: absent, bytes: 1, lines: 1 }]));
      await s3Backend(s3!).corruptBlob(a, bad.digest, 1);
      const report = await b.verify();
      expect(report).toMatchObject({ scanned: 3, ok: 2, corrupt: [bad.digest], missing: [absent], quarantined: [] });
      expect(await b.hasBlob(bad.digest)).toBe(true);
      const repaired = await b.verify({ repair: true });
      expect(repaired).toMatchObject({ corrupt: [bad.digest], quarantined: [bad.digest], repairFailed: [] });
      await expect(b.readPage(`artifact://${bad.digest}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
      // Republishing heals, on any host.
      expect(await a.publishBytes('will be damaged\n')).toMatchObject({ digest: bad.digest, deduplicated: false });
      expect(await b.verify()).toMatchObject({ scanned: 3, ok: 3, corrupt: [] });
      expect(manifest.digest).not.toBe(good.digest);
    } finally {
      await b.close();
    }
  });
});
