/**
 * The sessions' GC roots on an S3 store (a real Ceph RGW), read on host B
 * from what host A recorded: the scan takes A's references, the re-check
 * (`appended()`) takes what A recorded after the scan, in a session the scan
 * read and in one created since, and a batch B may not read fails the scan
 * and the re-check with EDISK instead of being skipped.
 */
import { PutBucketPolicyCommand } from '@aws-sdk/client-s3';
import { describe, expect, it } from 'vitest';
import type { TerminalResult } from '../../engine/index.js';
import { scanSessions } from '../../engine/sessions/roots.js';
import { s3Service, useTempBucket } from '../support/s3.js';
import { expectNoLeaks, keysUnder, twoHosts } from './s3-hosts.js';

const s3 = await s3Service();

/** The blobs a call's result references: its manifest and streams. */
function refsOf(r: TerminalResult): string[] {
  if (r.output?.kind !== 'streams') throw new Error(`expected streams, got ${JSON.stringify(r.output)}`);
  return [r.output.manifest, ...r.output.streams.map((s) => s.digest)];
}

/** Makes every object whose key is in `keys` unreadable (GetObject denied) for everyone, the owner too. */
async function denyGet(bucket: string, keys: string[]): Promise<void> {
  const Resource = keys.map((k) => `arn:aws:s3:::${bucket}/${k}`);
  const Policy = JSON.stringify({
    Version: '2012-10-17',
    Statement: [{ Effect: 'Deny', Principal: '*', Action: ['s3:GetObject'], Resource }],
  });
  await s3!.client.send(new PutBucketPolicyCommand({ Bucket: bucket, Policy }));
}

describe.runIf(s3)('GC roots of S3 sessions, across hosts', () => {
  it("a scan on B holds A's references; its re-check adds what A recorded since, in old and new sessions", async () => {
    const { a, b, dir } = await twoHosts(s3!);
    const first = await a.run('bash', { command: 'echo first' }, { session: 's' });
    const scan = await scanSessions(b.store);
    try {
      expect(scan).toMatchObject({ sessions: 1, liveCalls: 1 });
      for (const d of refsOf(first)) expect(scan.digests.has(d)).toBe(true);
      const later = await a.run('bash', { command: 'echo later' }, { session: 's' });
      const fresh = await a.run('bash', { command: 'echo fresh' }, { session: 'new' });
      // What is new in them (their empty stderr is the first call's too).
      const added = [...refsOf(later), ...refsOf(fresh)].filter((d) => !refsOf(first).includes(d));
      expect(added.length).toBeGreaterThanOrEqual(4);
      for (const d of added) expect(scan.digests.has(d)).toBe(false);
      const appended = await scan.appended();
      for (const d of added) expect(appended.has(d), d).toBe(true);
      // Called again, it still holds them: over-counting is safe, under-counting is not.
      const again = await scan.appended();
      for (const d of refsOf(later)) expect(again.has(d)).toBe(true);
    } finally {
      await scan.close();
    }
    await expectNoLeaks(dir);
  });

  describe('with a bucket whose policy can deny reads', () => {
    const bucket = useTempBucket(() => s3!);

    it('a batch B cannot GET fails the scan with EDISK, and so does one written after the scan', async () => {
      const { a, b, prefix, dir } = await twoHosts(s3!, bucket());
      await a.run('bash', { command: 'echo one' }, { session: 's' });
      const keys = await keysUnder(s3!, `${prefix}/sessions/s/`, bucket());
      expect(keys).toHaveLength(2);
      await denyGet(bucket(), [keys[1] as string]);
      await expect(scanSessions(b.store)).rejects.toMatchObject({ code: 'EDISK', details: { status: 403 } });
      await expect(b.replay('s')).rejects.toMatchObject({ code: 'EDISK' });

      // Readable again: the failed reads left no trace in B's mirror. The scan succeeds, then a batch
      // recorded after it cannot be read by the re-check.
      await denyGet(bucket(), [`${prefix}/nothing`]);
      expect(await b.replay('s')).toMatchObject({ corruptLines: 0, calls: [{ interrupted: false }] });
      const scan = await scanSessions(b.store);
      try {
        await a.run('bash', { command: 'echo two' }, { session: 's' });
        const now = await keysUnder(s3!, `${prefix}/sessions/s/`, bucket());
        await denyGet(bucket(), now.slice(2));
        await expect(scan.appended()).rejects.toMatchObject({ code: 'EDISK' });
      } finally {
        await scan.close();
      }
      await expectNoLeaks(dir);
    });
  });
});
