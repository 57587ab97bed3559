/**
 * The local files behind an S3 session's mirror (a real Ceph RGW), when
 * something else touches them: a mirror file that vanishes between its
 * sync and its open is synced again, never taken for a deleted session
 * (the collector would drop its roots).
 */
import { promises as fsp } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { TerminalResult } from '../../engine/index.js';
import { scanSessions } from '../../engine/sessions/roots.js';
import { s3Service } from '../support/s3.js';
import { expectNoLeaks, twoHosts } from './s3-hosts.js';

const s3 = await s3Service();

/** The blobs a call's result references: its manifest and streams. */
function refsOf(r: TerminalResult): string[] {
  if (r.output?.kind !== 'streams') throw new Error(`expected streams, got ${JSON.stringify(r.output)}`);
  return [r.output.manifest, ...r.output.streams.map((s) => s.digest)];
}

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
});
