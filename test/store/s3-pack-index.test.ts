/**
 * A pack object of an S3 store whose index cannot be read, damaged for real
 * on a Ceph RGW (the object overwritten with the S3 client): `verify` lists
 * it and goes on, `sluice verify` exits 1 naming it, and a collection fails
 * closed: EINTEGRITY before any delete, because a manifest in that pack may
 * name any blob (here one stored as an object) as its stream.
 */
import { GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import type { S3Backend } from '../../store/s3/backend.js';
import type { Store } from '../../store/store.js';
import { s3Service } from '../support/s3.js';
import { hostEnv } from './backends.js';
import { sluice, tempDir } from './helpers.js';
import { bucketOf, keysUnder, SetRoots, twoHosts } from './s3-gc-helpers.js';

const s3 = await s3Service();

const backendOf = (store: Store) => store.backend as unknown as S3Backend;

async function objectBody(key: string): Promise<Buffer> {
  const got = await s3!.client.send(new GetObjectCommand({ Bucket: s3!.bucket, Key: key }));
  return Buffer.from(await (got.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray());
}

/** Ways to damage a pack object's index, each an overwrite of the whole object. */
const DAMAGE: ReadonlyArray<{ name: string; change: (body: Buffer) => Buffer }> = [
  {
    name: 'its footer magic flipped',
    change: (b) => {
      const c = Buffer.from(b);
      c[c.length - 16] = (c[c.length - 16] ?? 0) ^ 0xff;
      return c;
    },
  },
  {
    name: 'its footer pointing past the object',
    change: (b) => {
      const c = Buffer.from(b);
      c.writeBigUInt64LE(BigInt(c.length * 2), c.length - 8);
      return c;
    },
  },
  {
    name: 'its index magic overwritten',
    change: (b) => {
      const c = Buffer.from(b);
      const at = Number(c.readBigUInt64LE(c.length - 8));
      c.fill(0, at, at + 8);
      return c;
    },
  },
  { name: 'truncated to 3 bytes', change: () => Buffer.from('abc') },
];

describe.runIf(s3)('an S3 pack whose index cannot be read', () => {
  it.each(DAMAGE)(
    'with $name: verify lists it, sluice verify exits 1, gc deletes nothing and fails EINTEGRITY',
    async ({ change }) => {
      const [a, b] = await twoHosts(s3!);
      const roots = new SetRoots();
      // The stream is above the pack threshold: a blob object, which only the manifest in the pack references.
      const pin = await a.pin();
      const stream = await a.publishBytes('s'.repeat(100_000), undefined, pin);
      const { encodeManifest } = await import('../../store/manifest.js');
      const manifest = await a.publishBytes(
        encodeManifest([{ name: 'stdout', digest: stream.digest, bytes: stream.bytes, lines: stream.lines }]),
        undefined,
        pin,
      );
      const other = await a.publishBytes('an unreferenced neighbour\n', undefined, pin);
      roots.record(manifest.digest);
      await pin.release();
      await a.close();

      const listed = await backendOf(b).packObjects.list();
      const damaged = listed.find((p) => p.entries.some((e) => e.digest === manifest.digest));
      expect(damaged).toBeDefined();
      expect(listed).toHaveLength(2);
      const rel = damaged!.key.slice(bucketOf(b).keyBase.length);
      await s3!.client.send(
        new PutObjectCommand({ Bucket: s3!.bucket, Key: damaged!.key, Body: change(await objectBody(damaged!.key)) }),
      );
      const blobsBefore = await keysUnder(s3!, b, 'blobs/');
      const packsBefore = await keysUnder(s3!, b, 'packs/');
      expect(blobsBefore).toHaveLength(1);

      // verify goes on past the pack and names it; the other pack is still checked.
      const report = await b.verify();
      expect(report.unreadablePacks).toHaveLength(1);
      expect(report.unreadablePacks[0]).toMatch(new RegExp(`^${rel}: E[A-Z]+: `));
      expect(report).toMatchObject({ corrupt: [], missing: [], packed: 1, scanned: 2, ok: 2 });

      // A collection deletes nothing: the stream object is referenced by a manifest only that pack holds.
      await expect(b.backend.collect(roots.hooks(), { graceMs: 0 })).rejects.toMatchObject({
        code: 'EINTEGRITY',
        details: { keys: [damaged!.key] },
      });
      expect(await keysUnder(s3!, b, 'blobs/')).toEqual(blobsBefore);
      expect(await keysUnder(s3!, b, 'packs/')).toEqual(packsBefore);
      expect(await keysUnder(s3!, b, 'gc/')).toEqual([]);
      expect((await b.readPage(`artifact://${stream.digest}`, { offset: 0, limit: 1 })).totalLines).toBe(1);
      expect((await b.readPage(`artifact://${other.digest}`)).content).toBe('an unreferenced neighbour\n');

      // The CLI, as an operator runs it on another host.
      const dir = await tempDir();
      const env = hostEnv(s3!, dir, 'c');
      const verify = await sluice(['verify', '--store', b.locator, '--json'], { cwd: dir, env });
      expect(verify.code).toBe(1);
      const json = JSON.parse(verify.stdout.toString('utf8')) as { unreadablePacks: string[]; corrupt: string[] };
      expect(json.unreadablePacks).toEqual(report.unreadablePacks);
      const text = await sluice(['verify', '--store', b.locator], { cwd: dir, env });
      expect(text.code).toBe(1);
      expect(text.stdout.toString('utf8')).toContain(`unreadable pack index ${rel}: `);
      const gc = await sluice(['gc', '--store', b.locator, '--grace', '0'], { cwd: dir, env });
      expect(gc.code).toBe(1);
      expect(gc.stderr).toMatch(/^EINTEGRITY: S3 pack .* has an unreadable index/);
      expect(await keysUnder(s3!, b, 'blobs/')).toEqual(blobsBefore);
      expect(await keysUnder(s3!, b, 'packs/')).toEqual(packsBefore);
    },
  );
});
