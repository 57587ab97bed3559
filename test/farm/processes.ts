/** `sluice worker` and `sluice batch` as real processes for the farm suites, each killed and awaited after its test. */
import { type ChildProcess, spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { MAIN } from '../cli/helpers.js';

/** A `sluice` process and what it wrote so far. */
export interface Proc {
  readonly child: ChildProcess;
  stdout: string;
  stderr: string;
  /** Resolves with the exit code (or 128 + signal number's name as null code) once it exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once stdout has a line matching `re` (rejects when the process exits first). */
  line(re: RegExp): Promise<string>;
}

/** Spawns `sluice args...` in `cwd`. */
export function sluiceProc(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Proc {
  const child = spawn(process.execPath, [MAIN, ...args], {
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  const waiting: Array<() => void> = [];
  const p: Proc = {
    child,
    stdout: '',
    stderr: '',
    exited: new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal }))),
    line: (re) =>
      new Promise((resolve, reject) => {
        const look = () => {
          const found = p.stdout.split('\n').find((l) => re.test(l));
          if (found !== undefined) resolve(found);
          else if (child.exitCode !== null || child.signalCode !== null) {
            reject(new Error(`sluice ${args[0]} exited before printing ${re}; stderr: ${p.stderr}`));
          } else waiting.push(look);
        };
        look();
      }),
  };
  const wake = () => {
    for (const w of waiting.splice(0)) w();
  };
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    p.stdout += d;
    wake();
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    p.stderr += d;
  });
  child.on('exit', wake);
  return p;
}

/** True while process `pid` exists (a zombie counts as gone only once reaped). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Processes and directories of the current test: every process still
 * running after it is SIGCONTed and SIGKILLed, every directory removed.
 */
export function useProcesses(): {
  spawn(args: string[], cwd: string, env?: NodeJS.ProcessEnv): Proc;
  dir(): Promise<string>;
} {
  const procs: Proc[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    for (const p of procs.splice(0)) {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        p.child.kill('SIGCONT');
        p.child.kill('SIGKILL');
      }
      await p.exited;
    }
    for (const d of dirs.splice(0)) await fsp.rm(d, { recursive: true, force: true });
  });
  return {
    spawn(args, cwd, env) {
      const p = sluiceProc(args, cwd, env);
      procs.push(p);
      return p;
    },
    async dir() {
      const d = await fsp.mkdtemp(join(tmpdir(), 'sluice-farm-'));
      dirs.push(d);
      return d;
    },
  };
}

/** Starts `sluice worker` on `url` over `store` in its own directory; resolves once it takes. */
export async function startWorker(
  procs: ReturnType<typeof useProcesses>,
  url: string,
  store: string,
  extra: string[] = [],
): Promise<Proc> {
  const cwd = await procs.dir();
  const p = procs.spawn(['worker', '--queue', url, '--store', store, ...extra], cwd);
  await p.line(/^sluice worker: .* taking from /);
  return p;
}
