/**
 * The spawn helper: a small Node process that starts tool processes on a
 * worker thread's behalf and hands their pipes back to it.
 *
 * Why it exists: Linux `fork` copies the parent's page tables, so what a
 * spawn costs grows with the spawning process's memory. Measured on this
 * project's 2-core machine: 4.4 ms per spawn from a 56 MiB process, 44 ms
 * from an 854 MiB one; an engine with its worker threads is 180 MiB or more,
 * and 1,000 concurrent `sleep 5` calls spent 4 s per worker thread inside
 * `spawn`. This process stays at the size of a bare Node, so each spawn
 * costs what it costs from a small process (docs/benchmarks.md, "Small
 * calls and spawning").
 *
 * Protocol (Node's IPC channel, JSON): the worker sends `{ t: 'env', env }`
 * once, first (the tools' environment: this process's own came through sh,
 * which passes on only the names it can hold), then
 * `{ t: 'spawn', id, file, args, cwd }`; this process answers
 * `{ t: 'out', id, pid }` carrying the child's stdout socket,
 * `{ t: 'err', id }` carrying its stderr socket, then `{ t: 'exit', id,
 * code, signal }`; or `{ t: 'error', id, code, message }` when the spawn
 * failed. `{ t: 'ready' }` is sent once at start.
 *
 * Lifetime: started through `/bin/sh -c '… &'` so it is not the engine's
 * child (no zombie is left in the engine when it exits, whichever worker
 * thread started it). It lives exactly as long as its channel: when the
 * channel closes (the worker ended, or the engine died, even by SIGKILL) it
 * SIGKILLs every process group it started that has not exited and exits.
 * Signals aimed at the engine's terminal (SIGINT, SIGHUP, SIGQUIT) are left
 * to the engine, which cancels its calls and so ends this channel.
 *
 * Every process it starts carries this helper's mark in its environment
 * (`SLUICE_SPAWN_MARK`, workers/spawn-mark.ts): a helper killed between
 * starting a process and reporting it leaves a process only the mark finds.
 *
 * This file imports only Node (and spawn-mark.ts, which imports only Node
 * too): it is a process entry of its own.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { SPAWN_MARK_VAR } from './spawn-mark.js';

/** A request from the worker. */
interface SpawnRequest {
  t: 'spawn';
  id: number;
  file: string;
  args: string[];
  cwd: string;
}

/** The tools' environment, from the worker. */
interface EnvMessage {
  t: 'env';
  env: NodeJS.ProcessEnv;
}

/**
 * What every process started here gets: the worker's environment, and this
 * helper's mark (argv[3]), so its thread can find them if this process dies
 * before reporting them (workers/spawn-mark.ts).
 */
let childEnv: NodeJS.ProcessEnv | undefined;

function setEnv(env: NodeJS.ProcessEnv): void {
  childEnv = { ...env };
  if (process.argv[3]) childEnv[SPAWN_MARK_VAR] = process.argv[3];
}
/**
 * `SLUICE_SPAWN_HELPER_STALL=1` under vitest (tests only): start processes and never report them.
 * Outside a test run (no `VITEST` in the environment) it does nothing, so a stray variable cannot
 * stall a user's calls.
 */
const STALL = process.env.SLUICE_SPAWN_HELPER_STALL === '1' && process.env.VITEST !== undefined;

/** Groups started and not yet exited: killed when the channel closes. */
const live = new Set<number>();

/** What the pipes' sockets need to travel without this process reading them first. */
interface PipeSocket {
  _handle?: { readStop?: () => number } | null;
}

function killAll(): void {
  for (const pid of live) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  live.clear();
}

function send(message: object, handle?: unknown): void {
  try {
    // keepOpen false: once the worker has the descriptor, this process closes its copy, so
    // end of file reaches the worker when the tool's process group closes the pipe.
    process.send?.(message, handle as never);
  } catch {
    // The channel is closing; 'disconnect' ends this process.
  }
}

function start(req: SpawnRequest): void {
  if (!childEnv) {
    send({ t: 'error', id: req.id, code: null, message: 'no environment before the first request' });
    return;
  }
  let child: ChildProcess;
  try {
    child = spawn(req.file, req.args, {
      cwd: req.cwd,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: childEnv,
    });
  } catch (err) {
    // E2BIG and a few others are thrown, not emitted.
    const e = err as NodeJS.ErrnoException;
    send({ t: 'error', id: req.id, code: e.code ?? null, message: e.message });
    return;
  }
  if (child.pid === undefined) {
    child.once('error', (err: NodeJS.ErrnoException) =>
      send({ t: 'error', id: req.id, code: err.code ?? null, message: err.message }),
    );
    return;
  }
  const pid = child.pid;
  live.add(pid);
  // Tests: stop here, as a helper killed between starting a process and reporting it would.
  if (STALL) return;
  // A socket Node creates starts reading at once; stopping it before the event loop next polls
  // means no byte the tool writes is ever read here: all of them reach the worker.
  for (const s of [child.stdout, child.stderr] as PipeSocket[]) s._handle?.readStop?.();
  send({ t: 'out', id: req.id, pid }, child.stdout);
  send({ t: 'err', id: req.id }, child.stderr);
  child.once('exit', (code, signal) => {
    live.delete(pid);
    send({ t: 'exit', id: req.id, code, signal });
  });
}

// What `ps` shows, with the engine's pid (as the watchdog's name has it): `sluice-spawner <engine pid>`.
process.title = `sluice-spawner ${process.argv[2] ?? ''}`.trim();
for (const s of ['SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGPIPE'] as const) process.on(s, () => {});
process.on('SIGTERM', () => {
  killAll();
  process.exit(0);
});
process.on('disconnect', () => {
  killAll();
  process.exit(0);
});
// A send on a channel that has closed fails later, as an 'error' on process: the channel's end,
// like 'disconnect' (unhandled, it would print a stack trace on the engine's stderr).
process.on('error', () => {
  killAll();
  process.exit(0);
});
process.on('message', (m: SpawnRequest | EnvMessage) => {
  if (m?.t === 'spawn') start(m);
  else if (m?.t === 'env') setEnv(m.env);
});
// Holding no directory busy: every spawn names its own cwd.
process.chdir('/');
// Its thread (or the engine) may have ended before this process was up: nothing to serve.
if (!process.connected) process.exit(0);
send({ t: 'ready' });
