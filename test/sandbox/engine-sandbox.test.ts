/**
 * The sandbox through the engine: the policy an engine and a call set, the
 * bash tool under it (real bwrap, real processes, a real store), the typed
 * errors of a limit and of a loosening call, and the policy in the result,
 * the session log and replay.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/index.js';
import { sandboxSupport } from '../../workers/sandbox/support.js';
import { closeEngines, openEngine, streamBytes, uniqueSleep, waitNoProcess, waitProcess } from '../support/engines.js';
import { runsIf } from './skipped.js';

const run = promisify(execFile);
const support = sandboxSupport();
const CLI = resolve(import.meta.dirname, '..', '..', 'dist', 'cli', 'main.js');

afterEach(closeEngines);

describe.runIf(support.available)('bash under the engine sandbox', () => {
  it('keeps a write in the workspace and fails one in /usr, recording the policy with the result', async () => {
    const { engine, dir } = await openEngine({ sandbox: { filesystem: 'workspace-write' } });
    const r = await engine.run('bash', { command: 'touch /usr/sluice-x; echo ok > ./x; echo done' }, { session: 's1' });
    expect(r.status).toBe('success');
    expect(await fsp.readFile(join(dir, 'x'), 'utf8')).toBe('ok\n');
    await expect(fsp.stat('/usr/sluice-x')).rejects.toMatchObject({ code: 'ENOENT' });
    const bytes = await streamBytes(engine, r);
    expect(bytes.stderr).toContain('Read-only file system');
    expect(r.sandbox).toMatchObject({ filesystem: 'workspace-write', network: 'off', workspace: dir });
    expect(r.sandbox?.hidden).toContain(join(dir, 'store'));
    const replayed = await engine.replay('s1');
    expect(replayed.calls[0]?.result.sandbox).toEqual(r.sandbox);
  });

  it('hides the store, the server token and credentials under HOME, and drops secret variables', async () => {
    const home = await fsp.mkdtemp(join(process.env.TMPDIR ?? '/tmp', 'sluice-home-'));
    await fsp.mkdir(join(home, '.ssh'));
    await fsp.writeFile(join(home, '.ssh', 'id_rsa'), 'PRIVATE KEY\n');
    const saved = { HOME: process.env.HOME, AWS_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY };
    process.env.HOME = home;
    process.env.AWS_SECRET_ACCESS_KEY = 'sekrit';
    try {
      const { engine, dir } = await openEngine({ sandbox: { filesystem: 'read-only' } });
      await fsp.writeFile(join(dir, 'store', 'server.token'), 'f'.repeat(64));
      const r = await engine.run('bash', {
        command: `cat ${home}/.ssh/id_rsa; ls -A ${dir}/store | wc -l; cat ${dir}/store/server.token; echo "aws=$AWS_SECRET_ACCESS_KEY"`,
      });
      const out = (await streamBytes(engine, r)).stdout ?? '';
      expect(out).not.toContain('PRIVATE KEY');
      expect(out).not.toContain('ffff');
      expect(out).toContain('aws=\n');
      expect(out.split('\n')[0]).toBe('0');
    } finally {
      process.env.HOME = saved.HOME;
      if (saved.AWS_SECRET_ACCESS_KEY === undefined) delete process.env.AWS_SECRET_ACCESS_KEY;
      else process.env.AWS_SECRET_ACCESS_KEY = saved.AWS_SECRET_ACCESS_KEY;
      await fsp.rm(home, { recursive: true, force: true });
    }
  });

  it("states the policy in bash's description, so the model knows it before it tries", async () => {
    const { engine, dir } = await openEngine({
      sandbox: { filesystem: 'workspace-write', limits: { memoryBytes: 256 * 1024 * 1024 } },
    });
    const bash = engine.tools().find((t) => t.name === 'bash');
    expect(bash?.description).toContain(`Commands run in a sandbox: only ${dir} and a private /tmp are writable`);
    expect(bash?.description).toContain('there is no network');
    expect(bash?.description).toContain('memory 256.0 MiB');
    expect(engine.tools().find((t) => t.name === 'read')?.description).not.toContain('sandbox');
  });

  it('refuses a missing working directory with EBADARGS, as an unsandboxed call does', async () => {
    const { engine, dir } = await openEngine({ sandbox: {} });
    const r = await engine.run('bash', { command: 'true', cwd: join(dir, 'nowhere') });
    expect(r.error).toMatchObject({ code: 'EBADARGS', details: { errno: 'ENOENT' } });
  });

  it('fails an MCP server it cannot sandbox, never starting it unconfined', async () => {
    const { engine } = await openEngine({ sandbox: { filesystem: 'read-only' } });
    const saved = process.env.PATH;
    // bwrap looked up on this PATH: none there.
    process.env.PATH = '/nonexistent';
    try {
      await expect(
        engine.addMcpServer({ name: 'fx', command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'] }),
      ).rejects.toMatchObject({ message: expect.stringContaining('bwrap') });
    } finally {
      process.env.PATH = saved;
    }
  });

  it('cannot signal the engine process from inside', async () => {
    const { engine } = await openEngine({ sandbox: {} });
    const r = await engine.run('bash', { command: `kill -0 ${process.pid} && echo reached || echo refused` });
    expect((await streamBytes(engine, r)).stdout).toBe('refused\n');
  });

  it('ends a call past its file-size limit with ELIMIT naming the limit, the output so far kept', async () => {
    const { engine, dir } = await openEngine({ sandbox: { limits: { fileSizeBytes: 100 * 1024 * 1024 } } });
    // The shell's last command: where one past the limit is not, the shell goes on (docs/security.md).
    const r = await engine.run('bash', { command: 'echo before; head -c 1G /dev/zero > big' });
    expect(r.status).toBe('failed');
    expect(r.error).toMatchObject({ code: 'ELIMIT', details: { limit: 'fileSize', value: 100 * 1024 * 1024 } });
    expect((await streamBytes(engine, r)).stdout).toBe('before\n');
    expect((await fsp.stat(join(dir, 'big'))).size).toBe(100 * 1024 * 1024);
  });

  it.runIf(
    runsIf(
      support.cgroup.memory,
      'the ELIMIT memory test',
      `no memory cgroup this user can make (${support.cgroup.reasons.join('; ') || support.cgroup.kind})`,
    ),
  )('ends a 2 GiB allocation under a 256 MiB limit with ELIMIT memory', async () => {
    const { engine } = await openEngine({ sandbox: { limits: { memoryBytes: 256 * 1024 * 1024 } } });
    const alloc = `${process.execPath} -e "Buffer.alloc(2 ** 31, 1); console.log('allocated')"`;
    const r = await engine.run('bash', { command: `echo start; ${alloc}; echo end` });
    expect(r.error).toMatchObject({ code: 'ELIMIT', details: { limit: 'memory', value: 256 * 1024 * 1024 } });
    expect((await streamBytes(engine, r)).stdout).toBe('start\nend\n');
  });

  it('narrows the engine policy per call and refuses a call that would loosen it (EBADARGS)', async () => {
    const { engine, dir } = await openEngine({
      sandbox: { filesystem: 'workspace-write', limits: { cpuSeconds: 10 } },
    });
    const loosen = [
      [{ filesystem: 'off' }, 'filesystem'],
      [{ network: 'on' }, 'network'],
      [{ workspace: '/etc' }, 'workspace'],
      [{ limits: { cpuSeconds: 20 } }, 'limits.cpuSeconds'],
      [{ env: ['AWS_SECRET_ACCESS_KEY'] }, 'env'],
      [{ filesystem: 'everything' }, 'filesystem'],
    ] as const;
    for (const [sandbox, field] of loosen) {
      expect(() => engine.call('bash', { command: 'true' }, { sandbox: sandbox as never })).toThrow(
        expect.objectContaining({ code: 'EBADARGS', details: { sandbox: field } }),
      );
    }
    await fsp.symlink('/etc', join(dir, 'etc-link'));
    expect(() => engine.call('bash', { command: 'true' }, { sandbox: { workspace: join(dir, 'etc-link') } })).toThrow(
      expect.objectContaining({ code: 'EBADARGS' }),
    );
    const r = await engine.run('bash', { command: 'echo x > ./y' }, { sandbox: { filesystem: 'read-only' } });
    expect(r.status).toBe('failed');
    expect(r.sandbox).toMatchObject({ filesystem: 'read-only', limits: { cpuSeconds: 10 } });
    await expect(fsp.stat(join(dir, 'y'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('leaves no process behind when a sandboxed call is cancelled or times out', async () => {
    const { engine } = await openEngine({ sandbox: {} });
    const a = uniqueSleep();
    const handle = engine.call('bash', { command: a.command });
    await waitProcess(a.marker);
    handle.cancel('test');
    expect((await handle.result).status).toBe('cancelled');
    expect(await waitNoProcess(a.marker)).toEqual([]);
    const b = uniqueSleep();
    const timed = await engine.run('bash', { command: b.command, timeout: 300 });
    expect(timed.error?.code).toBe('ETIMEOUT');
    expect(await waitNoProcess(b.marker)).toEqual([]);
  });

  it('runs a call unconfined and records no policy when the engine has none', async () => {
    const { engine, dir } = await openEngine();
    const outside = join(dir, '..', `sluice-unconfined-${process.pid}`);
    try {
      const r = await engine.run('bash', { command: `echo ok > ${outside}; kill -0 ${process.pid} && echo seen` });
      expect(r.sandbox).toBeUndefined();
      expect((await streamBytes(engine, r)).stdout).toBe('seen\n');
      expect(await fsp.readFile(outside, 'utf8')).toBe('ok\n');
    } finally {
      await fsp.rm(outside, { force: true });
    }
  });

  it('sluice run --sandbox workspace-write fails a write to /usr and keeps one in ./', async () => {
    const dir = await fsp.mkdtemp(join(process.env.TMPDIR ?? '/tmp', 'sluice-cli-sbx-'));
    try {
      const r = await run(
        process.execPath,
        [CLI, 'run', '--sandbox', 'workspace-write', 'bash', '--args', '{"command":"touch /usr/x; echo ok > ./x"}'],
        { cwd: dir },
      );
      expect(r.stdout).toContain('Read-only file system');
      expect(await fsp.readFile(join(dir, 'x'), 'utf8')).toBe('ok\n');
      await expect(fsp.stat('/usr/x')).rejects.toMatchObject({ code: 'ENOENT' });
      const bad = await run(process.execPath, [CLI, 'run', '--sandbox', 'all', 'bash'], { cwd: dir }).catch((e) => e);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('--sandbox must be');
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('an engine sandbox option that is not valid', () => {
  it('is EBADOPTION naming the field, before any store is made', async () => {
    const dir = await fsp.mkdtemp(join(process.env.TMPDIR ?? '/tmp', 'sluice-badopt-'));
    try {
      for (const [sandbox, option] of [
        [{ filesystem: 'off', network: 'off' }, 'sandbox.network'],
        [{ limits: { memoryBytes: -1 } }, 'sandbox.limits.memoryBytes'],
        [{ mode: 'x' }, 'sandbox'],
      ] as const) {
        await expect(Engine.open({ store: join(dir, 'store'), sandbox: sandbox as never })).rejects.toMatchObject({
          code: 'EBADOPTION',
          details: { option: expect.stringContaining(option) },
        });
      }
      expect(await fsp.readdir(dir)).toEqual([]);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});

describe.runIf(support.available)('sluice replay of a sandboxed call', () => {
  it('names the sandbox in the call heading', async () => {
    const dir = await fsp.mkdtemp(join(process.env.TMPDIR ?? '/tmp', 'sluice-replay-sbx-'));
    try {
      const opts = { cwd: dir };
      await run(
        process.execPath,
        [CLI, 'run', '--sandbox', 'read-only', '--session', 's', 'bash', '--args', '{"command":"true"}'],
        opts,
      );
      const r = await run(process.execPath, [CLI, 'replay', 's'], opts);
      expect(r.stdout).toMatch(/^── bash \S+ \(success, sandbox read-only, network off\)$/m);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});
