/**
 * Session records across two engine processes with separate local
 * directories on one S3 store (a real Ceph RGW): `sluice run --session` in
 * process A, then `sluice sessions` and `sluice replay` in process B, each
 * reaching the service through the standard AWS variables only.
 */
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { deletePrefix, hostEnv } from '../store/backends.js';
import { sluice, tempDir } from '../store/helpers.js';
import { s3Service } from '../support/s3.js';

const s3 = await s3Service();

describe.runIf(s3)('session records across two processes on one S3 store', () => {
  it('a call run with --session in process A is listed and replayed by process B', async () => {
    const dir = await tempDir();
    const prefix = `rec-procs-${randomBytes(6).toString('hex')}`;
    const store = `s3://${s3!.bucket}/${prefix}`;
    const env = (host: string) => hostEnv(s3!, dir, host);
    try {
      const args = JSON.stringify({ command: 'seq 1 3; echo oops >&2; exit 4' });
      const a = await sluice(['run', '--store', store, '--session', 'job-1', 'bash', '--args', args, '--json'], {
        cwd: dir,
        env: env('a'),
      });
      expect(a.stderr).toBe('');
      const run = JSON.parse(a.stdout.toString('utf8')) as { callId: string; status: string; model: string };
      expect(run.status).toBe('failed');
      const listed = await sluice(['sessions', '--store', store, '--json'], { cwd: dir, env: env('b') });
      expect(listed.stderr).toBe('');
      expect(listed.code).toBe(0);
      expect(JSON.parse(listed.stdout.toString('utf8'))).toMatchObject({
        sessions: [{ id: 'job-1', calls: 1, reverted: 0, interrupted: 0, corruptLines: 0 }],
      });
      const replayed = await sluice(['replay', 'job-1', '--store', store, '--json'], { cwd: dir, env: env('b') });
      expect(replayed.stderr).toBe('');
      expect(replayed.code).toBe(0);
      expect(JSON.parse(replayed.stdout.toString('utf8'))).toMatchObject({
        session: 'job-1',
        calls: [{ callId: run.callId, interrupted: false, result: { status: 'failed', model: run.model } }],
      });
      const missing = await sluice(['replay', 'no-such', '--store', store], { cwd: dir, env: env('b') });
      expect(missing.code).toBe(1);
      expect(missing.stderr).toMatch(/^ENOTFOUND: /);
      // Nothing left in either host's temporaries; B's mirror of the session is in its own local directory.
      expect(await fsp.readdir(join(dir, 'a', 'tmp'))).toEqual([]);
      expect(await fsp.readdir(join(dir, 'b', 'tmp'))).toEqual([]);
      expect(await fsp.readdir(join(dir, 'a', 'sessions'))).toEqual([]);
      expect(await fsp.readdir(join(dir, 'b', 'sessions', 'job-1'))).toEqual([expect.stringMatching(/\.mirror$/)]);
    } finally {
      await deletePrefix(s3!, s3!.bucket, `${prefix}/`);
    }
  });
});
