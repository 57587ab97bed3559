/**
 * A spill of a large MCP result on a full filesystem (a real 8 MiB tmpfs,
 * mounted by the test: root only; elsewhere it skips, printing why): the
 * call fails with EDISK naming the errno, the spill file is gone, the
 * call's result is recorded in its session, and the connection serves the
 * next call.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/index.js';
import { bigDigest, expectNoSpill, finish, fixtureServer, type TestEnv, uniqueMarker } from '../support/mcp.js';

const run = promisify(execFile);
const MB = 1_000_000;

let base: string;
let mounted: string | undefined;
let reason = '';

beforeAll(async () => {
  base = await fsp.mkdtemp(join(tmpdir(), 'sluice-spill-disk-'));
  if (process.getuid?.() !== 0) {
    reason = 'mounting a tmpfs needs root';
  } else {
    const dir = join(base, 'mnt');
    await fsp.mkdir(dir);
    try {
      await run('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', dir]);
      mounted = dir;
    } catch (err) {
      reason = `could not mount a tmpfs: ${(err as Error).message.split('\n')[0]}`;
    }
  }
  if (!mounted) console.log(`the full-disk spill test did not run: ${reason}`);
});

afterAll(async () => {
  if (mounted) await run('umount', [mounted]).catch(() => run('umount', ['-l', mounted as string]));
  await fsp.rm(base, { recursive: true, force: true });
});

describe('a spill on a full filesystem', () => {
  it('fails the call with EDISK and its errno, removes the spill, records the result', async (ctx) => {
    if (!mounted) return ctx.skip();
    const engine = await Engine.open({ store: join(mounted, 'store'), cwd: base });
    const env: TestEnv = { engine, dir: base, marker: uniqueMarker(), tools: [] };
    try {
      await engine.addMcpServer(fixtureServer('fx', env.marker));
      const r = await engine.run('fx.big', { bytes: 20 * MB }, { session: 'full' });
      expect([r.status, r.error?.code, r.error?.details?.errno]).toEqual(['failed', 'EDISK', 'ENOSPC']);
      await expectNoSpill(env);
      const replayed = await engine.replay('full');
      expect(replayed.calls.map((c) => [c.callId, c.result.error?.code])).toEqual([[r.callId, 'EDISK']]);
      // The space is back and the connection goes on.
      const ok = await engine.run('fx.big', { bytes: 2 * MB });
      expect(ok.output?.kind === 'single' && ok.output.digest).toBe(bigDigest(2 * MB));
      await expectNoSpill(env);
    } finally {
      await finish(env);
    }
  });
});
