/**
 * `.ci/queue-up.sh DIR` and `.ci/queue-down.sh DIR`, run for real: a server
 * stopped and started again on the same DIR comes back on the same port
 * with its queued items and recorded results, and the scripts leave no
 * process behind.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FarmQueue } from '../../engine/farm/index.js';
import { NATS, ownServersPossible } from '../support/queue.js';
import { parseEnvFile, runScript, scriptPath } from '../support/service.js';

const available = await ownServersPossible();

/** True while `pid` runs (a zombie does not count). */
async function running(pid: number): Promise<boolean> {
  const stat = await fsp.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat !== '' && stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

/** Processes whose command line names `dir`. */
async function processesNaming(dir: string): Promise<number[]> {
  const out: number[] = [];
  for (const name of await fsp.readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cmd = await fsp.readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (cmd.includes(dir) && (await running(Number(name)))) out.push(Number(name));
  }
  return out;
}

async function up(dir: string): Promise<{ env: Record<string, string>; pid: number }> {
  const { code, stderr } = await runScript(NATS.up, dir, NATS.startTimeoutMs);
  expect(code, stderr).toBe(0);
  const env = parseEnvFile(await fsp.readFile(join(dir, 'queue.env'), 'utf8'));
  return { env, pid: Number(await fsp.readFile(join(dir, 'nats.pid'), 'utf8')) };
}

async function down(dir: string): Promise<void> {
  const { code, stderr } = await runScript(NATS.down, dir, 30_000);
  expect(code, stderr).toBe(0);
}

describe.runIf(available)('the queue scripts', () => {
  let root: string | undefined;
  afterEach(async () => {
    if (root === undefined) return;
    await runScript(NATS.down, join(root, 'q'), 30_000);
    expect(await processesNaming(root)).toEqual([]);
    await fsp.rm(root, { recursive: true, force: true });
    root = undefined;
  });

  it('a restart on the same DIR keeps the port, the queued items and the recorded results; a connected client carries on', async () => {
    root = await fsp.mkdtemp(join(tmpdir(), 'sluice-queue-'));
    const dir = join(root, 'q');
    const first = await up(dir);
    const url = first.env.SLUICE_QUEUE!;
    expect(url).toMatch(/^nats:\/\/127\.0\.0\.1:\d+\/sluice$/);
    expect(first.env.SLUICE_TEST_QUEUE).toBe(url);
    expect(await running(first.pid)).toBe(true);

    const submitter = await FarmQueue.open(url, { ackWaitMs: 1000 });
    try {
      for (const i of ['a', 'b']) await submitter.submit('b', i, { tool: 'bash', args: { command: i } });
      await submitter.recordResult('b', 'done', { status: 'success', worker: 'w', attempts: 1 });

      await down(dir);
      expect(await running(first.pid)).toBe(false);
      expect(await fsp.readdir(join(dir, 'store'))).not.toEqual([]);
      const second = await up(dir);
      expect(second.env.SLUICE_QUEUE).toBe(url);
      expect(second.pid).not.toBe(first.pid);

      // The submitter's connection came back by itself.
      expect(await submitter.depth()).toBe(2);
      const worker = await FarmQueue.open(url, { ackWaitMs: 1000 });
      try {
        const taken: string[] = [];
        for (let d = await worker.take(); d !== null; d = await worker.take()) {
          taken.push(d.itemId);
          await d.complete();
        }
        expect(taken).toEqual(['a', 'b']);
        expect(await worker.result('b', 'done')).toEqual({ status: 'success', worker: 'w', attempts: 1 });
      } finally {
        await worker.close();
      }
    } finally {
      await submitter.close();
    }
    await down(dir);
    expect(await processesNaming(root)).toEqual([]);
    // Stopping a stopped server is nothing to do, and DIR is the caller's to remove.
    await down(dir);
    expect(await fsp.readdir(dir)).toContain('store');
  });

  it('up twice on one DIR stops the first server; a foreign non-empty DIR is refused by both scripts; nats-server missing is exit 3', async () => {
    root = await fsp.mkdtemp(join(tmpdir(), 'sluice-queue-'));
    const dir = join(root, 'q');
    const a = await up(dir);
    const b = await up(dir);
    expect(await running(a.pid)).toBe(false);
    expect(await running(b.pid)).toBe(true);
    await down(dir);
    expect(await running(b.pid)).toBe(false);

    const foreign = join(root, 'foreign');
    await fsp.mkdir(foreign);
    await fsp.writeFile(join(foreign, 'keep'), 'x');
    expect((await runScript(NATS.up, foreign, 10_000)).code).toBe(64);
    expect((await runScript(NATS.down, foreign, 10_000)).code).toBe(64);
    expect(await fsp.readdir(foreign)).toEqual(['keep']);

    // A PATH with what the script needs but nats-server.
    const bin = join(root, 'bin');
    await fsp.mkdir(bin);
    for (const tool of ['dirname', 'realpath', 'setsid', 'node']) {
      const which = tool === 'node' ? process.execPath : join('/usr/bin', tool);
      await fsp.symlink(which, join(bin, tool));
    }
    const missing = await new Promise<{ code: unknown; stderr: string }>((resolve) => {
      execFile('/bin/bash', [scriptPath(NATS.up), join(root!, 'none')], { env: { PATH: bin } }, (err, _o, stderr) =>
        resolve({ code: err ? err.code : 0, stderr }),
      );
    });
    expect(missing.code).toBe(3);
    expect(missing.stderr).toContain('queue-up: missing nats-server (Debian packages nats-server)');
  });
});
