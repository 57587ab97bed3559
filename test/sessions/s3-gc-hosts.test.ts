/**
 * GC and verify across two engine hosts on one S3 store (a real Ceph RGW),
 * each with its own local directory, sessions shared through the bucket:
 *
 * - host A, a real child process, runs calls whose outputs repeat (most
 *   publishes deduplicate) and reverts a call of unique output per round,
 *   while host B collects back to back with a grace period of 0: at the end
 *   no live record on either host references a missing blob, and the
 *   reverted outputs are gone;
 * - host A is killed with SIGKILL mid-publish (store/crash-point.ts), then
 *   B collects and verifies: what A recorded before survives, nothing
 *   referenced is missing, and A's lease expires (server clock) and is
 *   reclaimed with what it pinned.
 *
 * Each runs `SLUICE_TEST_S3_REPEATS` times: 2 in the normal run, which
 * keeps this file near 60 s; `SLUICE_TEST_S3_REPEATS=10` is the 10-runs-in-
 * a-row check (docs/operations.md, "GC across hosts"). No timing
 * assertions: B's loop runs until A says it is done.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Engine } from '../../engine/index.js';
import { Store } from '../../store/store.js';
import { deletePrefix, hostEnv, s3StoreConfig } from '../store/backends.js';
import { tempDir } from '../store/helpers.js';
import { s3Service } from '../support/s3.js';
import { keysUnder } from './s3-hosts.js';

const s3 = await s3Service();
const PUBLISHER = fileURLToPath(new URL('../fixtures/sessions/s3-publisher.mjs', import.meta.url));
const CRASH_CHILD = fileURLToPath(new URL('../fixtures/sessions/crash-child.mjs', import.meta.url));
/** Runs of each two-host test (see the module comment). */
const REPEATS = Math.max(1, Number(process.env.SLUICE_TEST_S3_REPEATS ?? '2'));
const ROUNDS = 12;
/** A's lease: short, so its expiry after the kill comes soon (judged by the server's clock). */
const LEASE_ENV = { SLUICE_S3_LEASE_TTL_MS: '1500', SLUICE_S3_LEASE_RENEW_MS: '300' };

interface Round {
  live: { session: string; callId: string; status: string; digests: string[] };
  reverted: string[];
}

/** A fresh prefix with local directories `<dir>/a` and `<dir>/b`; host B's engine. */
async function setUp(): Promise<{
  store: string;
  prefix: string;
  dir: string;
  b: Engine;
  cleanUp: () => Promise<void>;
}> {
  const dir = await tempDir();
  const prefix = `gc-hosts-${randomBytes(6).toString('hex')}`;
  const store = `s3://${s3!.bucket}/${prefix}`;
  const saved = process.env.SLUICE_STORE_LOCAL;
  process.env.SLUICE_STORE_LOCAL = join(dir, 'b');
  const b = await Engine.open({ store, cwd: dir }).finally(() => {
    if (saved === undefined) delete process.env.SLUICE_STORE_LOCAL;
    else process.env.SLUICE_STORE_LOCAL = saved;
  });
  return {
    store,
    prefix,
    dir,
    b,
    cleanUp: async () => {
      await b.close();
      await deletePrefix(s3!, s3!.bucket, `${prefix}/`);
    },
  };
}

/** A store instance of host B's own (for presence checks behind the engine). */
function openB(store: string, dir: string): Promise<Store> {
  return Store.open(store, { localDir: join(dir, 'b-check'), s3ClientConfig: s3StoreConfig(s3!) });
}

describe.runIf(s3)('GC and verify across two engine hosts on one S3 store', () => {
  it('B collects back to back while process A publishes with dedup and reverts: nothing referenced is lost', {
    repeats: REPEATS - 1,
    timeout: 120_000,
  }, async () => {
    const { store, prefix, dir, b, cleanUp } = await setUp();
    const check = await openB(store, dir);
    try {
      const a = spawn(process.execPath, [PUBLISHER, store, String(ROUNDS)], {
        cwd: dir,
        env: { ...process.env, ...hostEnv(s3!, dir, 'a'), ...LEASE_ENV },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const exited = new Promise<number | null>((resolve) => a.on('exit', (code) => resolve(code)));
      const rounds: Round[] = [];
      let done = false;
      const reading = (async () => {
        for await (const line of createInterface({ input: a.stdout })) {
          const msg = JSON.parse(line) as Round | { done: true };
          if ('done' in msg) done = true;
          else rounds.push(msg);
        }
      })();
      let collections = 0;
      let removed = 0;
      while (!done) {
        const report = await b.gc({ graceMs: 0 });
        collections++;
        removed += report.removed;
      }
      await reading;
      expect(await exited).toBe(0);
      const last = await b.gc({ graceMs: 0 });
      removed += last.removed;
      expect(collections).toBeGreaterThan(0);
      expect(rounds).toHaveLength(ROUNDS);
      // Every live call is readable on B and verified there; every reverted output is gone.
      const report = await b.verify();
      expect(report).toMatchObject({ corrupt: [], missing: [], records: [], corruptLines: 0 });
      for (const r of rounds) {
        expect(r.live.status).toBe('success');
        for (const d of r.live.digests) expect(await check.hasBlob(d)).toBe(true);
      }
      const reverted = new Set(rounds.flatMap((r) => r.reverted));
      const liveDigests = new Set(rounds.flatMap((r) => r.live.digests));
      for (const d of reverted) if (!liveDigests.has(d)) expect(await check.hasBlob(d)).toBe(false);
      expect(removed).toBeGreaterThan(0);
      const sessions = await b.sessions();
      expect(sessions.filter((s) => s.id.startsWith('s')).reduce((n, s) => n + s.calls, 0)).toBe(ROUNDS);
      // Nothing of either host's collections or leases is left, nor in A's temporaries.
      expect(await keysUnder(s3!, `${prefix}/gc/`)).toEqual([]);
      expect(await keysUnder(s3!, `${prefix}/leases/`)).toEqual([]);
      expect(await fsp.readdir(join(dir, 'a', 'tmp'))).toEqual([]);
    } finally {
      await check.close();
      await cleanUp();
    }
  });

  it('SIGKILL of process A mid-publish, then GC and verify on B: nothing referenced lost, its lease reclaimed', {
    repeats: REPEATS - 1,
    timeout: 120_000,
  }, async () => {
    const { store, prefix, dir, b, cleanUp } = await setUp();
    const check = await openB(store, dir);
    try {
      // A call of the session that A completed before: it must survive everything.
      const env = {
        ...process.env,
        ...hostEnv(s3!, dir, 'a'),
        ...LEASE_ENV,
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      };
      const saved = process.env.SLUICE_STORE_LOCAL;
      process.env.SLUICE_STORE_LOCAL = join(dir, 'a');
      const before = await Engine.open({ store, cwd: dir }).then(async (e) => {
        try {
          return await e.run('bash', { command: 'echo before' }, { session: 'crash' });
        } finally {
          await e.close();
          if (saved === undefined) delete process.env.SLUICE_STORE_LOCAL;
          else process.env.SLUICE_STORE_LOCAL = saved;
        }
      });
      const tag = randomBytes(4).toString('hex');
      // Killed once its stdout blob is uploaded under its lease, before anything references it.
      const a = spawn(process.execPath, [CRASH_CHILD, store, dir, tag], {
        cwd: dir,
        env: { ...env, SLUICE_CRASH_AT: 'blob-renamed' },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      a.stdout.on('data', (c: Buffer) => {
        out += c.toString();
      });
      const signal = await new Promise<NodeJS.Signals | null>((resolve) => a.on('exit', (_c, s) => resolve(s)));
      expect({ signal, out }).toEqual({ signal: 'SIGKILL', out: '' });
      const killedLeases = await keysUnder(s3!, `${prefix}/leases/`);
      expect(killedLeases).toHaveLength(1);

      // B collects until the dead host's lease has expired by the server's clock and is reclaimed.
      let reclaimed = 0;
      let removed = 0;
      while (reclaimed === 0) {
        const report = await b.gc({ graceMs: 0 });
        reclaimed += report.pinsReclaimed;
        removed += report.removed;
      }
      expect(reclaimed).toBe(1);
      // The killed call's unreferenced stdout blob went with its lease.
      expect(removed).toBeGreaterThanOrEqual(1);
      expect(await keysUnder(s3!, `${prefix}/leases/`)).toEqual([]);
      const report = await b.verify();
      expect(report).toMatchObject({ corrupt: [], missing: [], records: [], corruptLines: 0 });
      const replay = await b.replay('crash');
      expect(replay.calls[0]).toMatchObject({ callId: before.callId, result: { status: 'success' } });
      if (before.output?.kind !== 'streams') throw new Error('expected streams');
      for (const d of [before.output.manifest, ...before.output.streams.map((s) => s.digest)]) {
        expect(await check.hasBlob(d)).toBe(true);
      }
      expect(await keysUnder(s3!, `${prefix}/gc/`)).toEqual([]);
      // The killed host's temporaries are its own directory's; B reclaims only its own.
      expect(await fsp.readdir(join(dir, 'b', 'tmp'))).toEqual([]);
    } finally {
      await check.close();
      await cleanUp();
    }
  });
});
