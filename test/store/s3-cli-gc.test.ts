/**
 * `sluice gc` and `sluice verify` on an S3 store (a real Ceph RGW), each a
 * real process reaching the service through the standard AWS variables: a
 * call recorded by process A survives `sluice gc --grace 0` on host B while
 * an unreferenced blob goes; `sluice verify` reports a corrupt object and
 * exits 1, `--repair` deletes it, and the reports keep their schema.
 */
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Store } from '../../store/store.js';
import { s3Service } from '../support/s3.js';
import { deletePrefix, hostEnv, s3Backend, s3StoreConfig } from './backends.js';
import { sluice, tempDir } from './helpers.js';

const s3 = await s3Service();

describe.runIf(s3)('sluice gc and sluice verify on an S3 store', () => {
  it('collect across hosts keeping what a session references, and verify and repair the bucket', async () => {
    const dir = await tempDir();
    const prefix = `cli-gc-${randomBytes(6).toString('hex')}`;
    const store = `s3://${s3!.bucket}/${prefix}`;
    const env = (host: string) => hostEnv(s3!, dir, host);
    const side = await Store.open(store, { localDir: join(dir, 'side'), s3ClientConfig: s3StoreConfig(s3!) });
    try {
      const run = await sluice(
        ['run', '--store', store, '--session', 'keep', 'bash', '--args', '{"command":"echo kept"}', '--json'],
        { cwd: dir, env: env('a') },
      );
      expect(run).toMatchObject({ code: 0, stderr: '' });
      const result = JSON.parse(run.stdout.toString('utf8')) as { output: { manifest: string } };
      const garbage = await side.publishBytes('garbage\n');

      const gc = await sluice(['gc', '--store', store, '--grace', '0', '--json'], { cwd: dir, env: env('b') });
      expect(gc).toMatchObject({ code: 0, stderr: '' });
      const report = JSON.parse(gc.stdout.toString('utf8')) as Record<string, unknown>;
      expect(report).toMatchObject({ dryRun: false, graceMs: 0, removed: 1, orphanGroupsKilled: 0 });
      expect(report.roots).toBeGreaterThanOrEqual(3);
      expect(await side.hasBlob(garbage.digest)).toBe(false);
      expect(await side.hasBlob(result.output.manifest)).toBe(true);

      // An object of its own (the garbage above was packed): the test damages it in place.
      const objects = await Store.open(store, {
        localDir: join(dir, 'objects'),
        s3ClientConfig: s3StoreConfig(s3!),
        packMaxBlobBytes: 0,
      });
      const damaged = await objects.publishBytes('damaged soon\n');
      await objects.close();
      await s3Backend(s3!).corruptBlob(side, damaged.digest, 0);
      const verify = await sluice(['verify', '--store', store, '--json'], { cwd: dir, env: env('b') });
      expect(verify.code).toBe(1);
      expect(JSON.parse(verify.stdout.toString('utf8'))).toMatchObject({
        corrupt: [damaged.digest],
        missing: [],
        records: [],
        quarantined: [],
      });
      const repair = await sluice(['verify', '--repair', '--store', store, '--json'], { cwd: dir, env: env('b') });
      expect(JSON.parse(repair.stdout.toString('utf8'))).toMatchObject({
        corrupt: [damaged.digest],
        quarantined: [damaged.digest],
      });
      const clean = await sluice(['verify', '--store', store, '--json'], { cwd: dir, env: env('b') });
      expect(clean.code).toBe(0);
      expect(JSON.parse(clean.stdout.toString('utf8'))).toMatchObject({ corrupt: [], missing: [], records: [] });
      expect(await fsp.readdir(join(dir, 'a', 'tmp'))).toEqual([]);
      expect(await fsp.readdir(join(dir, 'b', 'tmp'))).toEqual([]);
    } finally {
      await side.close();
      await deletePrefix(s3!, s3!.bucket, `${prefix}/`);
    }
  });
});
