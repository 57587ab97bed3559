/**
 * Resource limits of a sandboxed process, end to end: prepareSandboxed's
 * command run by a real engine-like process (run-sandboxed.mjs) as the
 * engine user and, from root, as nobody. As root the memory and processes
 * limits go into cgroups and end with their verdict; as nobody (no writable
 * cgroup) they are RLIMITs that fail inside the program, unattributed.
 */
import { execFile, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxLimits } from '../../engine/protocol/sandbox.js';
import { onPath } from '../../workers/sandbox/bwrap.js';
import { detectCgroup } from '../../workers/sandbox/cgroup.js';
import { limitsPolicy } from './policy.js';

const FIXTURE = join(dirname(fileURLToPath(import.meta.url)), 'run-sandboxed.mjs');
const PYTHON = ['/usr/bin/python3', '/usr/local/bin/python3'].find((p) => spawnSync(p, ['-c', '']).status === 0);
const MARKER = `sluice-limits-${process.pid}-${Date.now()}`;

function bwrapWorks(): boolean {
  const bwrap = onPath('bwrap');
  return bwrap !== undefined && spawnSync(bwrap, ['--ro-bind', '/', '/', '--unshare-all', 'true']).status === 0;
}

const asRoot = process.getuid?.() === 0;
const runuser = asRoot ? onPath('runuser') : undefined;
const cgroup = detectCgroup();
const cgroupLimits = cgroup.memory !== undefined && cgroup.pids !== undefined;
if (!cgroupLimits) {
  console.info(`cgroup limit tests did not run: ${[`kind ${cgroup.kind}`, ...cgroup.reasons].join('; ')}`);
}

/** What run-sandboxed.mjs reports. */
interface Ran {
  code: number | null;
  signal: string | null;
  verdict: { limit: string; value: number } | null;
  message: string | null;
  cgroups: string[];
  existedWhileRunning: boolean[];
  leftAfterRelease: string[];
  stdout: string;
  stderr: string;
}

/** The processes still running with the test's marker in their command line. */
function leftovers(): string {
  return spawnSync('pgrep', ['-af', MARKER], { encoding: 'utf8' }).stdout.trim();
}

/** Names of groups under the engine's cgroups that a process of `pid` made. */
function groupsOf(pid: number): string[] {
  return [cgroup.memory, cgroup.pids]
    .filter((d): d is string => d !== undefined)
    .flatMap((d) => readdirSync(d).filter((n) => n.startsWith(`sluice-${pid}-`)));
}

describe.runIf(bwrapWorks() && PYTHON !== undefined)('sandbox limits (real bwrap, real processes)', () => {
  let workspace: string;
  let root: string;

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'sluice-limits-'));
    chmodSync(root, 0o755);
    workspace = join(root, 'ws');
    // Writable by nobody for the unprivileged runs.
    mkdirSync(workspace);
    chmodSync(workspace, 0o777);
  });

  afterEach(() => {
    expect(leftovers()).toBe('');
  });

  afterAll(() => {
    rmSync(root, { recursive: true, force: true });
  });

  const users = [{ name: 'the engine user', prefix: [] as string[], root: asRoot }];
  if (runuser) users.push({ name: 'nobody', prefix: [runuser, '-u', 'nobody', '--'], root: false });

  for (const user of users) {
    describe(`as ${user.name}`, () => {
      /** Runs `bash -c script` (or `python3 -c`) under `limits` as this user. */
      function run(
        program: 'bash' | 'python',
        script: string,
        limits: SandboxLimits,
        extra: { releaseAfterMs?: number } = {},
      ): Promise<Ran & { engine: number }> {
        const policy = limitsPolicy(workspace, limits);
        const file = program === 'bash' ? '/bin/bash' : (PYTHON as string);
        const spec = { policy, file, args: ['-c', script, MARKER], cwd: workspace, ...extra };
        const [cmd, ...args] = [...user.prefix, process.execPath, FIXTURE, JSON.stringify(spec)];
        return new Promise((resolve, reject) => {
          const child = execFile(cmd as string, args, { encoding: 'utf8', timeout: 30_000 }, (err, stdout, stderr) => {
            if (err) reject(new Error(`run-sandboxed failed: ${err.message}\n${stderr}`));
            else resolve({ ...(JSON.parse(stdout) as Ran), engine: child.pid ?? 0 });
          });
        });
      }

      const viaCgroup = user.root && cgroupLimits;
      if (cgroupLimits && !user.root) {
        console.info(`cgroup limit tests as ${user.name} did not run: v1 groups are made only by root here`);
      }
      if (user.root)
        console.info(
          `RLIMIT fallback tests as ${user.name} did not run: they are for a user other than root (RLIMIT_NPROC never holds for root)`,
        );

      it.runIf(viaCgroup)('ends a 2 GiB allocation under 256 MiB with the memory verdict (cgroup)', async () => {
        const r = await run('python', 'b = bytearray(2 << 30)', { memoryBytes: 256 << 20 });
        expect(r.code).toBe(137);
        expect(r.verdict).toEqual({ limit: 'memory', value: 256 << 20 });
        expect(r.message).toBe('limit memory (256.0 MiB) exceeded');
        expect(r.existedWhileRunning).toEqual([true]);
        expect(r.leftAfterRelease).toEqual([]);
      });

      it.runIf(!user.root)(
        'fails a 2 GiB allocation under 256 MiB inside the program, unattributed (RLIMIT_AS)',
        async () => {
          const r = await run('python', 'b = bytearray(2 << 30)', { memoryBytes: 256 << 20 });
          expect(r.code).toBe(1);
          expect(r.stderr).toContain('MemoryError');
          expect(r.verdict).toBeNull();
          expect(r.cgroups).toEqual([]);
        },
      );

      // Bounded: 200 forks at most, each child sleeping; the parent stops at the first EAGAIN.
      const forkBomb = [
        'import os, sys, time',
        'n = 0',
        'try:',
        '    for _ in range(200):',
        '        if os.fork() == 0:',
        '            time.sleep(30)',
        '            os._exit(0)',
        '        n += 1',
        'except OSError as e:',
        '    print(n, e.errno, file=sys.stderr)',
        '    sys.exit(3)',
      ].join('\n');

      it.runIf(viaCgroup)('ends a fork bomb under 64 processes with the processes verdict (pids cgroup)', async () => {
        const r = await run('python', forkBomb, { processes: 64 });
        expect(r.code).toBe(3);
        const [forked, errno] = r.stderr.trim().split(' ').map(Number);
        expect(errno).toBe(11);
        // bwrap's init and the program itself count: 62 children fit in 64.
        expect(forked).toBe(62);
        expect(r.verdict).toEqual({ limit: 'processes', value: 64 });
        expect(r.message).toBe('limit processes (64) exceeded');
        expect(r.leftAfterRelease).toEqual([]);
      });

      it.runIf(!user.root)(
        'stops a fork bomb under 64 processes with EAGAIN, unattributed (RLIMIT_NPROC)',
        async () => {
          const r = await run('python', forkBomb, { processes: 64 });
          expect(r.code).toBe(3);
          const [forked, errno] = r.stderr.trim().split(' ').map(Number);
          expect(errno).toBe(11);
          expect(forked).toBeLessThanOrEqual(62);
          expect(r.verdict).toBeNull();
        },
      );

      it('ends a 1 GiB file under a 100 MiB fileSizeBytes limit with the fileSize verdict', async () => {
        const big = join(workspace, 'big');
        try {
          const r = await run('bash', `exec head -c 1073741824 /dev/zero > ${big}`, { fileSizeBytes: 100 << 20 });
          expect(r.code).toBe(153);
          expect(r.verdict).toEqual({ limit: 'fileSize', value: 100 << 20 });
          expect(r.message).toBe('limit fileSize (100.0 MiB) exceeded');
          expect(statSync(big).size).toBe(100 << 20);
        } finally {
          rmSync(big, { force: true });
        }
      });

      it('ends a busy loop under cpuSeconds 1 with the cpu verdict', async () => {
        const r = await run('bash', 'while :; do :; done', { cpuSeconds: 1 });
        expect(r.code).toBe(152);
        expect(r.verdict).toEqual({ limit: 'cpu', value: 1 });
        expect(r.message).toBe('limit cpu (1 CPU second) exceeded');
      });

      it('gives no verdict to a program that exits 0 under its limits', async () => {
        const limits = user.root ? { memoryBytes: 256 << 20, processes: 64, cpuSeconds: 5 } : { cpuSeconds: 5 };
        const r = await run('bash', 'echo fine', limits);
        expect(r).toMatchObject({ code: 0, verdict: null, stdout: 'fine\n', leftAfterRelease: [] });
      });

      it.runIf(viaCgroup)('cannot move itself out of its cgroups: they are read-only inside', async () => {
        const parents = [cgroup.memory, cgroup.pids] as string[];
        const script = parents.map((d) => `echo $$ > ${d}/cgroup.procs`).join('; ');
        const r = await run('bash', `${script}; exit 7`, { memoryBytes: 256 << 20, processes: 64 });
        expect(r.code).toBe(7);
        expect(r.stderr.match(/Read-only file system/g)).toHaveLength(2);
        expect(r.leftAfterRelease).toEqual([]);
      });

      it.runIf(viaCgroup)('kills a still-running sandbox on release() and leaves no cgroup or process', async () => {
        const r = await run(
          'bash',
          'sleep 30 & sleep 30 & wait',
          { memoryBytes: 256 << 20, processes: 64 },
          {
            releaseAfterMs: 200,
          },
        );
        expect(r.signal).toBe('SIGKILL');
        expect(r.verdict).toBeNull();
        expect(r.cgroups).toHaveLength(2);
        expect(r.existedWhileRunning).toEqual([true, true]);
        expect(r.leftAfterRelease).toEqual([]);
        expect(groupsOf(r.engine)).toEqual([]);
      });
    });
  }
});
