/**
 * Two engine processes with separate local directories share one S3 store
 * (a real Ceph RGW): `sluice run` on host A publishes a call's output,
 * `sluice read` on host B pages it; each process reaches the service
 * through the standard AWS variables only, as a deployed host would.
 */
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { s3Service } from '../support/s3.js';
import { deletePrefix, hostEnv } from './backends.js';
import { sluice, tempDir } from './helpers.js';

const s3 = await s3Service();

describe.runIf(s3)('two engine processes on one S3 store', () => {
  it('a call published by process A is paged by process B, from its own local directory', async () => {
    const dir = await tempDir();
    const prefix = `procs-${randomBytes(6).toString('hex')}`;
    const store = `s3://${s3!.bucket}/${prefix}`;
    const env = (host: string) => hostEnv(s3!, dir, host);
    try {
      const a = await sluice(['run', '--store', store, 'bash', '--args', '{"command":"seq 1 300000"}', '--json'], {
        cwd: dir,
        env: env('a'),
      });
      expect(a.stderr).toBe('');
      expect(a.code).toBe(0);
      const result = JSON.parse(a.stdout.toString('utf8')) as { status: string; output: { manifest: string } };
      expect(result.status).toBe('success');
      const uri = `artifact://${result.output.manifest}/stdout`;
      const b = await sluice(['read', '--store', store, uri, '--offset', '299998', '--limit', '5', '--json'], {
        cwd: dir,
        env: env('b'),
      });
      expect(b.stderr).toBe('');
      expect(b.code).toBe(0);
      expect(JSON.parse(b.stdout.toString('utf8'))).toMatchObject({
        content: '299999\n300000\n',
        offset: 299_998,
        totalLines: 300_000,
        nextOffset: null,
      });
      const missing = await sluice(['read', '--store', store, `artifact://${'d'.repeat(64)}`], {
        cwd: dir,
        env: env('b'),
      });
      expect(missing.code).toBe(1);
      expect(missing.stderr).toMatch(/^ENOTFOUND: /);
      // Each host's temporaries are gone; nothing appeared in the working directory but the two local directories.
      expect((await fsp.readdir(dir)).sort()).toEqual(['a', 'b']);
      expect(await fsp.readdir(join(dir, 'a', 'tmp'))).toEqual([]);
      expect(await fsp.readdir(join(dir, 'b', 'tmp'))).toEqual([]);
    } finally {
      await deletePrefix(s3!, s3!.bucket, `${prefix}/`);
    }
  });
});
