/**
 * Fencing of a stalled host on an S3 store, for real: host A is a child
 * process holding a pin (its lease) on a blob nothing records; it is
 * stopped with SIGSTOP past its lease's TTL (judged by the server's clock),
 * host B's collection reclaims the lease and deletes the blob, and A is
 * resumed. A must then learn that its lease is gone and refuse to vouch for
 * what that lease pinned (EDISK, `details.s3: 'LeaseLost'`), never report
 * the dangling reference as safe; a new pin gets a new lease and its
 * publish uploads the content again.
 */
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { s3Service } from '../support/s3.js';
import { s3Backend } from './backends.js';
import { tempDir } from './helpers.js';
import { keysUnder, SetRoots, until } from './s3-gc-helpers.js';

// These tests count, damage or delete blob objects: every blob gets an object of its own here (packed
// blobs on S3 are tested in test/store/s3-packs.test.ts).
process.env.SLUICE_PACK_MAX_BLOB_BYTES = '0';

const s3 = await s3Service();
const HOST = fileURLToPath(new URL('../fixtures/store/lease-host.mjs', import.meta.url));

/** A lease host child: one JSON request per line, one JSON answer per line. */
function startHost(locator: string, localDir: string) {
  const child: ChildProcessByStdio<Writable, Readable, null> = spawn(process.execPath, [HOST, locator, localDir], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: {
      ...process.env,
      ...s3!.env,
      SLUICE_S3_LEASE_TTL_MS: '1500',
      SLUICE_S3_LEASE_RENEW_MS: '300',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => JSON.parse(((await lines.next()).value as string) ?? 'null') as Record<string, unknown>;
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    exited,
    ready: next(),
    async request(op: string, args: Record<string, unknown> = {}) {
      child.stdin.write(`${JSON.stringify({ op, ...args })}\n`);
      return next();
    },
  };
}

describe.runIf(s3)('a host stalled past its lease on an S3 store', () => {
  it('is fenced: its old pin fails typed (LeaseLost) and never vouches; a new pin heals by uploading again', async () => {
    const b = await s3Backend(s3!).openStore();
    const localDir = join(await tempDir(), 'host-a');
    const host = startHost(b.locator, localDir);
    try {
      expect(await host.ready).toEqual({ ready: true });
      const first = await host.request('pinPublish', { text: 'pinned by a host that stalls\n' });
      expect(first).toMatchObject({ ok: true, deduplicated: false });
      const digest = first.digest as string;
      expect(await keysUnder(s3!, b, 'leases/')).toHaveLength(1);

      host.child.kill('SIGSTOP');
      // Until B's collection finds the lease expired by the server's clock, reclaims it, and deletes the blob.
      const roots = new SetRoots();
      const collect = () => b.backend.collect(roots.hooks(), { graceMs: 0 });
      let report = await collect();
      await until(async () => {
        if (report.pinsReclaimed > 0) return true;
        report = await collect();
        return report.pinsReclaimed > 0;
      }, 'the stopped host lease to be reclaimed');
      expect(report).toMatchObject({ pinsReclaimed: 1, removed: 1 });
      expect(await b.hasBlob(digest)).toBe(false);
      host.child.kill('SIGCONT');
      expect(await host.request('vouch')).toEqual({ ok: false, code: 'EDISK', s3: 'LeaseLost' });
      expect(await host.request('publishAgain', { text: 'pinned by a host that stalls\n' })).toEqual({
        ok: false,
        code: 'EDISK',
        s3: 'LeaseLost',
      });
      expect(await b.hasBlob(digest)).toBe(false);
      // A new pin, a new lease: the content goes up again.
      expect(await host.request('fresh', { text: 'pinned by a host that stalls\n' })).toEqual({
        ok: true,
        digest,
        deduplicated: false,
      });
      expect((await b.readPage(`artifact://${digest}`)).content).toBe('pinned by a host that stalls\n');
      expect(await host.request('close')).toEqual({ ok: true, closed: true });
      host.child.stdin.end();
      expect(await host.exited).toBe(0);
      expect(await fsp.readdir(join(localDir, 'tmp'))).toEqual([]);
      // Its lease went with the close (nothing held); B's collections left nothing behind.
      expect(await keysUnder(s3!, b, 'leases/')).toEqual([]);
      expect(await keysUnder(s3!, b, 'gc/')).toEqual([]);
    } finally {
      host.child.kill('SIGCONT');
      host.child.kill('SIGKILL');
      await host.exited;
    }
  });
});
