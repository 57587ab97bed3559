/** `sluice worker` and `sluice batch` as real processes for the farm suites, and their own queue servers: each stopped and awaited after its test. */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeEach } from 'vitest';
import { MAIN, ROOT } from '../cli/helpers.js';
import { describeProcesses } from '../support/invariants.js';

const run = promisify(execFile);

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

/** Processes (not zombies) whose command line or working directory is inside one of `dirs`. */
export async function processesIn(dirs: readonly string[]): Promise<number[]> {
  if (dirs.length === 0) return [];
  const inside = (path: string) => dirs.some((d) => path === d || path.startsWith(`${d}/`));
  const out: number[] = [];
  for (const name of await fsp.readdir('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    const stat = await fsp.readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    if (stat === '' || stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z') continue;
    const cmd = await fsp.readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    const cwd = await fsp.readlink(`/proc/${name}/cwd`).catch(() => '');
    if (cmd.split('\0').some(inside) || inside(cwd)) out.push(Number(name));
  }
  return out;
}

/** What {@link useProcesses} gives a test. */
export interface TestProcesses {
  /** Spawns `sluice args...` in `cwd`; killed after the test. Refused once the test has ended (a loop of a test that timed out). */
  spawn(args: string[], cwd: string, env?: NodeJS.ProcessEnv): Proc;
  /** A new directory, removed after the test. */
  dir(): Promise<string>;
  /** Aborted when the current test ends, however it ends: its loops stop there instead of running on. */
  readonly signal: AbortSignal;
  /** Runs `fn` after the test, once its processes are gone and before its directories are removed (last first). */
  defer(fn: () => unknown): void;
  /**
   * Starts (or restarts, on the same port and store) a nats-server in `dir`
   * with `.ci/queue-up.sh`; resolves with its `nats://127.0.0.1:PORT/farm`.
   * Stopped with `.ci/queue-down.sh` after the test.
   */
  queueServer(dir: string): Promise<string>;
}

/**
 * Processes, queue servers and directories of the current test, cleaned up
 * after it whether it passed, failed or timed out (vitest runs the hooks
 * while a timed-out test's body may still be running): the signal is
 * aborted, every process still running is SIGCONTed and SIGKILLed and
 * awaited, deferred clean-ups run, queue servers stop, and then no process
 * may be left whose command line or working directory is in the test's
 * directories (one found is killed and fails the test), and the directories
 * are removed.
 */
export function useProcesses(): TestProcesses {
  const procs: Proc[] = [];
  const dirs: string[] = [];
  const queues = new Set<string>();
  const deferred: Array<() => unknown> = [];
  let controller = new AbortController();
  beforeEach(() => {
    controller = new AbortController();
  });
  const cleanup = async () => {
    controller.abort(new Error('the test ended'));
    for (const p of procs.splice(0)) {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        p.child.kill('SIGCONT');
        p.child.kill('SIGKILL');
      }
      await p.exited;
    }
    const errors: unknown[] = [];
    for (const fn of deferred.splice(0).reverse()) {
      await Promise.resolve()
        .then(fn)
        .catch((e: unknown) => errors.push(e));
    }
    for (const q of [...queues]) {
      queues.delete(q);
      await run(join(ROOT, '.ci/queue-down.sh'), [q]).catch((e: unknown) => errors.push(e));
    }
    const mine = dirs.splice(0);
    // A killed worker's tool processes are ended by its watchdog, a moment later.
    let left = await processesIn(mine);
    for (let i = 0; i < 50 && left.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      left = await processesIn(mine);
    }
    if (left.length > 0) {
      errors.push(new Error(`processes left after the test: ${describeProcesses(left).join('; ')}`));
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone meanwhile.
        }
      }
    }
    for (const d of mine) await fsp.rm(d, { recursive: true, force: true });
    if (errors.length > 0) throw errors[0];
  };
  afterEach(cleanup);
  afterAll(cleanup);
  return {
    spawn(args, cwd, env) {
      controller.signal.throwIfAborted();
      const p = sluiceProc(args, cwd, env);
      procs.push(p);
      return p;
    },
    async dir() {
      const d = await fsp.mkdtemp(join(tmpdir(), 'sluice-farm-'));
      dirs.push(d);
      return d;
    },
    get signal() {
      return controller.signal;
    },
    defer(fn) {
      deferred.push(fn);
    },
    async queueServer(dir) {
      controller.signal.throwIfAborted();
      queues.add(dir);
      const { stdout } = await run(join(ROOT, '.ci/queue-up.sh'), [dir]);
      const url = /SLUICE_TEST_QUEUE=(\S+)/.exec(stdout)?.[1];
      if (!url) throw new Error(`queue-up printed no URL: ${stdout}`);
      return url.replace(/\/sluice$/, '/farm');
    },
  };
}

/**
 * Starts `sluice worker` on `url` over `store` in its own directory, with
 * `env(that directory)` added to its environment; resolves once it takes.
 */
export async function startWorker(
  procs: TestProcesses,
  url: string,
  store: string,
  extra: string[] = [],
  env: (cwd: string) => NodeJS.ProcessEnv = () => ({}),
): Promise<Proc> {
  const cwd = await procs.dir();
  const p = procs.spawn(['worker', '--queue', url, '--store', store, ...extra], cwd, env(cwd));
  await p.line(/^sluice worker: .* taking from /);
  return p;
}
