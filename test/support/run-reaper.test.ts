/**
 * A test run killed before its teardown is still cleaned up: the run
 * reaper (test/support/run-reaper.ts) waits for its runner's end through a
 * pipe, then stops the run's cluster and queue server (only the daemons
 * naming their config files) and removes the run's directory.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { reaperCommand } from './run-reaper.js';

const HOLDER = fileURLToPath(new URL('../fixtures/support/reaper-holder.mjs', import.meta.url));

/** A `sleep` whose command line reads `argv0`, as a daemon's would (s3-down.sh matches on it). */
function fakeDaemon(argv0: string): ChildProcess {
  return spawn('bash', ['-c', `exec -a "${argv0}" sleep 1000`], { stdio: 'ignore', detached: true });
}

const exited = (c: ChildProcess) =>
  new Promise<void>((resolve) =>
    c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', () => resolve()),
  );

/** True while `pid` runs (a zombie does not count). */
async function running(pid: number): Promise<boolean> {
  const stat = await fsp.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat !== '' && stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

async function until(check: () => Promise<boolean>): Promise<boolean> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}

describe('the test run reaper', () => {
  it("a runner killed by SIGKILL: its cluster's daemons and queue server are stopped, a stranger is not, and the run's directory is removed", async () => {
    const runDir = await fsp.mkdtemp(join(tmpdir(), 'sluice-reaper-'));
    const s3 = join(runDir, 's3');
    await fsp.mkdir(join(s3, 'run'), { recursive: true });
    await fsp.writeFile(join(s3, '.sluice-s3'), '');
    const daemon = fakeDaemon(`fake-osd -c ${s3}/ceph.conf -i 0`);
    const queue = join(runDir, 'queue');
    await fsp.mkdir(queue, { recursive: true });
    await fsp.writeFile(join(queue, '.sluice-queue'), '');
    const server = fakeDaemon(`fake-nats-server -c ${queue}/nats.conf`);
    const stranger = fakeDaemon('fake-osd -c /elsewhere/ceph.conf -i 0');
    try {
      await until(async () => (await fsp.readFile(`/proc/${daemon.pid}/cmdline`, 'utf8')).includes('ceph.conf'));
      await fsp.writeFile(join(s3, 'run', 'osd.0.pid'), `${daemon.pid}\n`);
      await until(async () => (await fsp.readFile(`/proc/${server.pid}/cmdline`, 'utf8')).includes('nats.conf'));
      await fsp.writeFile(join(queue, 'nats.pid'), `${server.pid}\n`);
      // A pid file naming a process that is not this cluster's: never killed.
      await fsp.writeFile(join(s3, 'run', 'stale.pid'), `${stranger.pid}\n`);

      const holder = spawn(process.execPath, [HOLDER, JSON.stringify(reaperCommand(runDir))], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const ready = await new Promise<string>((resolve) =>
        holder.stdout?.once('data', (d: Buffer) => resolve(String(d))),
      );
      const reaperPid = Number(/^ready (\d+)/.exec(ready)?.[1]);
      expect(reaperPid).toBeGreaterThan(0);
      // While the runner lives the reaper only waits.
      expect(await running(reaperPid)).toBe(true);
      expect(await running(daemon.pid as number)).toBe(true);

      holder.kill('SIGKILL');
      await exited(holder);
      expect(
        await until(
          async () =>
            !(await fsp.stat(runDir).then(
              () => true,
              () => false,
            )),
        ),
      ).toBe(true);
      await Promise.all([exited(daemon), exited(server)]);
      expect(daemon.signalCode).toBe('SIGKILL');
      // The queue server is asked first: SIGTERM lets a real one close its store.
      expect(server.signalCode).toBe('SIGTERM');
      expect(await running(stranger.pid as number)).toBe(true);
      expect(await until(async () => !(await running(reaperPid)))).toBe(true);
    } finally {
      stranger.kill('SIGKILL');
      daemon.kill('SIGKILL');
      server.kill('SIGKILL');
      await Promise.all([exited(stranger), exited(daemon), exited(server)]);
      await fsp.rm(runDir, { recursive: true, force: true });
    }
    expect(await running(stranger.pid as number)).toBe(false);
  });
});
