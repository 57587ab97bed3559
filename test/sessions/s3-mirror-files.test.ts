/**
 * The local files behind an S3 session's mirror (a real Ceph RGW), when
 * something else touches them: a mirror file that vanishes between its
 * sync and its open is synced again, never taken for a deleted session
 * (the collector would drop its roots); a dead owner's mirror that is a
 * symlink is never adopted, so nothing is written through it; and a dead
 * owner's state that is a FIFO does not block the mirror.
 */
import { execFileSync } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { TerminalResult } from '../../engine/index.js';
import { scanSessions } from '../../engine/sessions/roots.js';
import { sessionDir } from '../../engine/sessions/session-id.js';
import { s3Service } from '../support/s3.js';
import { expectNoLeaks, twoHosts } from './s3-hosts.js';

const s3 = await s3Service();

/** The blobs a call's result references: its manifest and streams. */
function refsOf(r: TerminalResult): string[] {
  if (r.output?.kind !== 'streams') throw new Error(`expected streams, got ${JSON.stringify(r.output)}`);
  return [r.output.manifest, ...r.output.streams.map((s) => s.digest)];
}

/** The last batch of a session: its number and listed ETag. */
async function lastBatch(prefix: string, id: string): Promise<{ seq: number; etag: string }> {
  const out = await s3!.client.send(
    new ListObjectsV2Command({ Bucket: s3!.bucket, Prefix: `${prefix}/sessions/${id}/` }),
  );
  const last = (out.Contents ?? []).at(-1);
  if (!last?.Key || !last.ETag) throw new Error('no batch');
  return { seq: Number(last.Key.slice(last.Key.lastIndexOf('/') + 1)), etag: last.ETag };
}

/** A stem of a file owned by a process that is not running (no such pid, another boot). */
const DEAD_STEM = '99999999-t1b00000000rdead00000000';

afterEach(() => {
  vi.restoreAllMocks();
});

describe.runIf(s3)('the local files of S3 session mirrors', () => {
  it('a mirror file removed between its sync and its open is mirrored again: the scan keeps its roots', async () => {
    const { a, b, dir } = await twoHosts(s3!);
    const call = await a.run('bash', { command: 'echo rooted' }, { session: 's' });
    // The first read-only open of a mirror finds its file just removed (as a concurrent sync restarting it would).
    const open = fsp.open.bind(fsp);
    let removed = 0;
    vi.spyOn(fsp, 'open').mockImplementation(async (path, flags, mode) => {
      if (String(path).endsWith('.mirror') && typeof flags === 'number' && (flags & 3) === 0 && removed === 0) {
        removed++;
        await fsp.unlink(path as string);
      }
      return open(path, flags, mode);
    });
    const scan = await scanSessions(b.store);
    try {
      expect(removed).toBe(1);
      expect(scan).toMatchObject({ sessions: 1, liveCalls: 1 });
      for (const d of refsOf(call)) expect(scan.digests.has(d), d).toBe(true);
    } finally {
      await scan.close();
    }
    vi.restoreAllMocks();
    expect(await b.replay('s')).toMatchObject({ corruptLines: 0, calls: [{ callId: call.callId }] });
    await expectNoLeaks(dir);
  });

  it("a dead owner's mirror that is a symlink is not adopted: nothing is written through it", async () => {
    const { a, b, dir, prefix } = await twoHosts(s3!);
    const first = await a.run('bash', { command: 'echo one' }, { session: 's' });
    const victim = join(dir, 'victim');
    await fsp.writeFile(victim, 'x'.repeat(100));
    const local = sessionDir(b.store.layout, 's');
    await fsp.mkdir(local, { recursive: true });
    await fsp.symlink(victim, join(local, `${DEAD_STEM}.mirror`));
    // A state that fits the target and names the session's real last batch, so only the file's kind can refuse it.
    const last = await lastBatch(prefix, 's');
    await fsp.writeFile(join(local, `${DEAD_STEM}.mstate`), JSON.stringify({ end: 100, ...last, modifiedAt: 0 }));
    const second = await a.run('bash', { command: 'echo two' }, { session: 's' });
    const replay = await b.replay('s');
    expect(replay).toMatchObject({ corruptLines: 0 });
    expect(replay.calls.map((c) => c.callId)).toEqual([first.callId, second.callId]);
    expect(await fsp.readFile(victim, 'latin1')).toBe('x'.repeat(100));
    // The dead owner's link is gone, the file it named kept.
    expect((await fsp.readdir(local)).filter((n) => n.startsWith(DEAD_STEM))).toEqual([]);
    await expectNoLeaks(dir);
  });

  it("a dead owner's state that is a FIFO is skipped, not waited on", async () => {
    const { a, b, dir } = await twoHosts(s3!);
    const call = await a.run('bash', { command: 'echo one' }, { session: 's' });
    const local = sessionDir(b.store.layout, 's');
    await fsp.mkdir(local, { recursive: true });
    await fsp.writeFile(join(local, `${DEAD_STEM}.mirror`), 'x'.repeat(100));
    execFileSync('mkfifo', [join(local, `${DEAD_STEM}.mstate`)]);
    const replay = await b.replay('s');
    expect(replay).toMatchObject({ corruptLines: 0, calls: [{ callId: call.callId }] });
    expect((await fsp.readdir(local)).filter((n) => n.startsWith(DEAD_STEM))).toEqual([]);
    await expectNoLeaks(dir);
  });
});
