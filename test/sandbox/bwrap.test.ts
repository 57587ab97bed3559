import { execFile, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onPath, processLimitWorks, type SandboxPolicy, sandboxCommand } from '../../workers/sandbox/bwrap.js';
import { runsIf } from './skipped.js';

/** True when bwrap is installed and can build a sandbox here (user namespaces allowed). */
function bwrapWorks(): boolean {
  const bwrap = onPath('bwrap');
  if (!bwrap) return false;
  return spawnSync(bwrap, ['--ro-bind', '/', '/', '--unshare-all', 'true']).status === 0;
}

const asRoot = process.getuid?.() === 0;
const runuser = asRoot ? onPath('runuser') : undefined;

const base: Omit<SandboxPolicy, 'workspace'> = {
  filesystem: 'workspace-write',
  network: 'off',
  writable: [],
  hidden: [],
  env: ['PATH', 'HOME'],
};

describe.runIf(bwrapWorks())('a sandboxed process (real bwrap)', () => {
  let root: string;
  let workspace: string;
  let home: string;
  let server: Server;
  let port: number;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'sluice-sandbox-'));
    // Reachable by nobody for the unprivileged runs.
    chmodSync(root, 0o755);
    workspace = join(root, 'ws');
    home = join(root, 'home');
    mkdirSync(workspace, { mode: 0o777 });
    chmodSync(workspace, 0o777);
    mkdirSync(join(home, '.ssh'), { recursive: true, mode: 0o755 });
    writeFileSync(join(home, '.ssh', 'id_rsa'), 'PRIVATE KEY\n', { mode: 0o644 });
    mkdirSync(join(workspace, '.sluice'));
    writeFileSync(join(workspace, '.sluice', 'token'), 'secret-token\n', { mode: 0o644 });
    server = createServer((s) => s.end('hello\n'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as { port: number }).port;
  });

  afterAll(async () => {
    await new Promise((r) => server.close(r));
    // Every sandbox died with its command: nothing runs from the fixture directory.
    const left = spawnSync('pgrep', ['-f', root], { encoding: 'utf8' }).stdout.trim();
    expect(left).toBe('');
    rmSync(root, { recursive: true, force: true });
  });

  const users = [{ name: 'the engine user', prefix: [] as string[] }];
  if (runuser) users.push({ name: 'nobody', prefix: [runuser, '-u', 'nobody', '--'] });

  for (const user of users) {
    describe(`as ${user.name}`, () => {
      const unprivileged = user.prefix.length > 0 || !asRoot;

      /** Runs `bash -c script` under `policy` and returns its exit status, stdout and stderr. */
      // Asynchronous: the test's own TCP server must answer while the sandbox runs.
      function run(
        script: string,
        policy: Partial<SandboxPolicy> = {},
        env: NodeJS.ProcessEnv = process.env,
        cwd = workspace,
      ) {
        const uid = unprivileged ? 65534 : 0;
        const cmd = sandboxCommand({ ...base, workspace, ...policy }, 'bash', ['-c', script], cwd, env, uid);
        const [file, ...args] = [...user.prefix, cmd.file, ...cmd.args];
        return new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
          execFile(file as string, args, { env, encoding: 'utf8', timeout: 30_000 }, (err, stdout, stderr) => {
            const status = err ? (typeof err.code === 'number' ? err.code : null) : 0;
            resolve({ status, stdout, stderr });
          });
        });
      }

      it('keeps a write in the workspace and refuses one outside it (EROFS)', async () => {
        const r = await run('touch /usr/sluice-escape; echo ok > ./kept; cat ./kept');
        expect(r.stdout).toBe('ok\n');
        expect(r.stderr).toContain('Read-only file system');
        expect(readFileSync(join(workspace, 'kept'), 'utf8')).toBe('ok\n');
        expect(spawnSync('test', ['-e', '/usr/sluice-escape']).status).toBe(1);
        rmSync(join(workspace, 'kept'));
      });

      it('writes nothing in read-only mode, not even in the workspace', async () => {
        const r = await run('echo x > ./nope; echo $? ; echo y > /tmp/private && cat /tmp/private', {
          filesystem: 'read-only',
        });
        expect(r.stdout).toBe('1\ny\n');
        expect(readdirSync(workspace).sort()).toEqual(['.sluice']);
      });

      it('makes nothing writable by starting in another directory', async () => {
        const r = await run('echo x > ./escape; echo $?', {}, process.env, '/var');
        expect(r.stdout).toBe('1\n');
        expect(existsSync('/var/escape')).toBe(false);
      });

      it('refuses a write through a workspace symlink that points outside', async () => {
        // Outside /tmp, which the sandbox replaces with its own: the target is there to be attacked.
        const outside = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : root, 'sluice-outside-'));
        const target = join(outside, 'victim.txt');
        try {
          chmodSync(outside, 0o755);
          writeFileSync(target, 'original\n', { mode: 0o666 });
          symlinkSync(target, join(workspace, 'link'));
          const r = await run('echo overwritten > ./link; echo $?');
          expect(r.stdout).toBe('1\n');
          expect(r.stderr).toContain('Read-only file system');
          expect(readFileSync(target, 'utf8')).toBe('original\n');
        } finally {
          rmSync(join(workspace, 'link'), { force: true });
          rmSync(outside, { recursive: true, force: true });
        }
      });

      it('shows hidden paths empty: a key under HOME, the store inside the workspace', async () => {
        const r = await run(`cat ${home}/.ssh/id_rsa; ls -A ${home}/.ssh | wc -l; ls -A ./.sluice | wc -l`, {
          hidden: [join(home, '.ssh', 'id_rsa'), join(workspace, '.sluice')],
        });
        // The key's file is there but reads empty (/dev/null over it); the store's directory is empty.
        expect(r.stdout).toBe('1\n0\n');
        expect(r.stdout).not.toContain('PRIVATE KEY');
        expect(r.stdout).not.toContain('secret-token');
      });

      it('cannot reach a TCP server on the host loopback with network off', async () => {
        const r = await run(`exec 3<>/dev/tcp/127.0.0.1/${port} && head -1 <&3; echo rc=$?`);
        expect(r.stdout).not.toContain('hello');
        expect(r.stderr).toMatch(/Connection refused|Network is unreachable/);
        const on = await run(`exec 3<>/dev/tcp/127.0.0.1/${port} && head -1 <&3`, { network: 'on' });
        expect(on.stdout).toBe('hello\n');
      });

      it('sees no process outside: the engine pid is not there to kill', async () => {
        const r = await run(`kill -0 ${process.pid}; echo rc=$?; ls /proc | grep -c '^[0-9]'`);
        expect(r.stdout.split('\n')[0]).toBe('rc=1');
        expect(Number(r.stdout.split('\n')[1])).toBeLessThan(6);
      });

      it('passes only the allowed environment and keeps no capability', async () => {
        const env = { ...process.env, AWS_SECRET_ACCESS_KEY: 'leak', SLUICE_TOKEN: 'leak' };
        const r = await run(
          'printenv AWS_SECRET_ACCESS_KEY SLUICE_TOKEN; printenv HOME; grep CapEff /proc/self/status',
          {},
          {
            ...env,
            HOME: home,
          },
        );
        expect(r.stdout).toBe(`${home}\nCapEff:\t0000000000000000\n`);
      });

      it('kills a process past its file-size limit with SIGXFSZ (exit 153)', async () => {
        const r = await run('exec head -c 1073741824 /dev/zero > ./big', {
          limits: { fileSizeBytes: 100 * 1024 * 1024 },
        });
        expect(r.status).toBe(128 + 25);
        expect(readFileSync(join(workspace, 'big')).length).toBe(100 * 1024 * 1024);
        rmSync(join(workspace, 'big'));
      });

      it('kills a process past its CPU limit with SIGXCPU (exit 152)', async () => {
        const r = await run('while :; do :; done', { limits: { cpuSeconds: 1 } });
        expect(r.status).toBe(128 + 24);
      });

      it('refuses a 2 GiB allocation under a 256 MiB memory limit', async () => {
        const r = await run('exec python3 -c "b = bytearray(2 << 30)"', { limits: { memoryBytes: 256 * 1024 * 1024 } });
        expect(r.status).toBe(1);
        expect(r.stderr).toContain('MemoryError');
      });

      it.runIf(
        runsIf(
          unprivileged,
          `the RLIMIT_NPROC fork bomb as ${user.name}`,
          'the kernel never checks RLIMIT_NPROC for root',
        ),
      )('stops a fork bomb at its processes limit', async () => {
        const r = await run(
          'for i in $(seq 60); do sleep 1 & done 2>/dev/null; ls /proc | grep -c "^[0-9]"; kill -9 -1',
          {
            limits: { processes: 20 },
          },
        );
        expect(Number(r.stdout.trim())).toBeLessThanOrEqual(20);
      });
    });
  }

  it('refuses a processes limit it cannot hold as root (EUNSUPPORTED)', () => {
    if (processLimitWorks()) return;
    expect(() =>
      sandboxCommand({ ...base, workspace, limits: { processes: 10 } }, 'bash', ['-c', 'true'], workspace),
    ).toThrow(expect.objectContaining({ code: 'EUNSUPPORTED', details: { missing: 'processes-limit' } }));
  });
});

describe('a sandbox that cannot be had', () => {
  it('fails with EUNSUPPORTED naming bwrap, never running unconfined', () => {
    expect(() =>
      sandboxCommand({ ...base, workspace: tmpdir() }, 'bash', ['-c', 'true'], tmpdir(), { PATH: '/nonexistent' }),
    ).toThrow(expect.objectContaining({ code: 'EUNSUPPORTED', details: { missing: 'bwrap' } }));
  });
});

describe.runIf(onPath('bwrap') !== undefined && onPath('prlimit') !== undefined)('limits a cgroup holds', () => {
  const limits = { memoryBytes: 256 << 20, processes: 64, cpuSeconds: 2 };
  const rlimits = (cgroup: ('memory' | 'processes')[], uid: number) =>
    sandboxCommand({ ...base, workspace: tmpdir(), limits }, 'true', [], tmpdir(), process.env, uid, { cgroup })
      .args.filter((a) => /^--(as|nproc|cpu)=/.test(a))
      .sort();

  it('are left out of the RLIMITs, and a processes limit then holds for root', () => {
    expect(rlimits(['memory', 'processes'], 0)).toEqual(['--cpu=2:3']);
    expect(rlimits(['memory'], 65534)).toEqual(['--cpu=2:3', '--nproc=64:64']);
    expect(rlimits([], 65534)).toEqual([`--as=${256 << 20}:${256 << 20}`, '--cpu=2:3', '--nproc=64:64']);
    expect(() => rlimits(['memory'], 0)).toThrow(expect.objectContaining({ details: { missing: 'processes-limit' } }));
  });
});
