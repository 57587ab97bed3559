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
import { readEventLog } from '../../engine/sessions/log-reader.js';
import { Store } from '../../store/store.js';
import { deletePrefix, hostEnv, s3StoreConfig } from '../store/backends.js';
import { sluice, tempDir } from '../store/helpers.js';
import { s3Service } from '../support/s3.js';
import { costOf } from './s3-hosts.js';

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
      // One mirror and its state: the replay process adopted what the sessions process left.
      expect(
        (await fsp.readdir(join(dir, 'b', 'sessions', 'job-1')))
          .map((n) => n.replace(/^[0-9]+-[0-9a-zA-Z]+/, 'X'))
          .sort(),
      ).toEqual(['X.mirror', 'X.mstate']);
    } finally {
      await deletePrefix(s3!, s3!.bucket, `${prefix}/`);
    }
  });

  it('a process adopts the mirror a finished process left: a session read before costs one LIST, then a GET per new batch', async () => {
    const dir = await tempDir();
    const prefix = `rec-procs-${randomBytes(6).toString('hex')}`;
    const store = `s3://${s3!.bucket}/${prefix}`;
    const runOnA = async (text: string) => {
      const r = await sluice(
        ['run', '--store', store, '--session', 's', 'bash', '--args', JSON.stringify({ command: `echo ${text}` })],
        { cwd: dir, env: hostEnv(s3!, dir, 'a') },
      );
      expect(r.code).toBe(0);
    };
    let b: Store | undefined;
    try {
      await runOnA('one');
      await runOnA('two');
      const first = await sluice(['replay', 's', '--store', store, '--json'], {
        cwd: dir,
        env: hostEnv(s3!, dir, 'b'),
      });
      expect(first.code).toBe(0);
      b = await Store.open(store, { localDir: join(dir, 'b'), s3ClientConfig: s3StoreConfig(s3!) });
      let records = 0;
      const adopted = await costOf(b, async () => {
        records = (await readEventLog(b as Store, 's')).records.length;
      });
      expect(records).toBe(4);
      expect(adopted).toEqual({ puts: 0, gets: 0, heads: 0, lists: 1, deletes: 0 });
      // The dead process's mirror is this one's now: one mirror and its state, named for this process.
      const names = (await fsp.readdir(join(dir, 'b', 'sessions', 's'))).sort();
      expect(names.map((n) => n.replace(/^[0-9]+-[0-9a-zA-Z]+/, 'X'))).toEqual(['X.mirror', 'X.mstate']);
      for (const n of names) expect(n.startsWith(`${process.pid}-`)).toBe(true);
      await runOnA('six');
      const grown = await costOf(b, async () => {
        records = (await readEventLog(b as Store, 's')).records.length;
      });
      expect(records).toBe(6);
      expect(grown).toEqual({ puts: 0, gets: 2, heads: 0, lists: 1, deletes: 0 });
      expect(await fsp.readdir(join(dir, 'b', 'tmp'))).toEqual([]);
    } finally {
      await b?.close();
      await deletePrefix(s3!, s3!.bucket, `${prefix}/`);
    }
  });
});
