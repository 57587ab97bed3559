/**
 * The spawn helper: a small Node process that starts tool processes for a
 * worker thread and hands their pipes back, so a spawn costs what it costs
 * from a bare Node, not from the engine (docs/benchmarks.md, "Small calls
 * and spawning").
 *
 * Protocol (Node IPC, JSON): the worker sends `{ t: 'env', env }` first (sh
 * passes on only the names it can hold), then `{ t: 'spawn', id, file,
 * args, cwd }`; this answers `{ t: 'out', id, pid }` with the stdout socket,
 * `{ t: 'err', id }` with the stderr socket, then `{ t: 'exit', id, code,
 * signal }`, or `{ t: 'error', id, code, message }`. `{ t: 'ready' }` once.
 *
 * Started through `/bin/sh -c '… &'`, so no zombie is left in the engine. It
 * lives as long as its channel: when that closes (even on the engine's
 * SIGKILL) it SIGKILLs every group it started that is still running.
 * Terminal signals are left to the engine, whose cancelling ends the channel.
 * Its children carry its mark (workers/spawn-mark.ts), so a helper killed
 * before reporting one leaves nothing unfindable. A process entry of its
 * own: it imports only Node and spawn-mark.ts.
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

/** The worker's environment plus this helper's mark (argv[3]). */
let childEnv: NodeJS.ProcessEnv | undefined;

function setEnv(env: NodeJS.ProcessEnv): void {
  childEnv = { ...env };
  if (process.argv[3]) childEnv[SPAWN_MARK_VAR] = process.argv[3];
}
/** Tests only (needs `VITEST`, so a stray variable cannot stall a user): start and never report. */
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
    // keepOpen false: this copy closes, so EOF reaches the worker when the tool's group closes it.
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
  if (STALL) return;
  // Stopped before the loop next polls, no byte is read here: all reach the worker.
  for (const s of [child.stdout, child.stderr] as PipeSocket[]) s._handle?.readStop?.();
  send({ t: 'out', id: req.id, pid }, child.stdout);
  send({ t: 'err', id: req.id }, child.stderr);
  child.once('exit', (code, signal) => {
    live.delete(pid);
    send({ t: 'exit', id: req.id, code, signal });
  });
}

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
// A send on a closed channel fails later as 'error': the channel's end, like 'disconnect'.
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
if (!process.connected) process.exit(0);
send({ t: 'ready' });
