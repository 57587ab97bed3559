/**
 * Starts a tool's process from a worker thread, stdout and stderr piped
 * back: through this thread's spawn helper once it is up, directly until
 * then and wherever it cannot run. A spawn from the engine copies the page
 * tables of all its memory; the helper's copies a bare Node's, or nothing
 * for the Python helper (posix_spawn; docs/benchmarks.md, "Small calls and
 * spawning"). The pipes' descriptors come back over the helper's IPC
 * channel, so capture reads the same sockets Node's `spawn` would give.
 *
 * `SLUICE_SPAWN_PYTHON` picks the Python interpreter (empty: the Node
 * helper); `SLUICE_SPAWN_HELPER=0` turns the helper off, `=wait` sends even
 * the first spawns to it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import type { Socket } from 'node:net';
import { resolve as absolutePath, isAbsolute } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { ToolFailedError } from '../engine/protocol/errors.js';
import { executableFile } from './executable.js';
import { helperEnv } from './helper-env.js';
import { killMarked } from './spawn-mark.js';

/** How a process ended: its exit code, or the signal that ended it. */
export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A started process: its group's leader pid, its two pipes, and its end. */
export interface PipedProcess {
  /** The pid, which is also its process group's id (it leads a group of its own). */
  readonly pid: number;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Settles when the process has exited; rejects (ETOOLFAILED) when the helper died first and its fate is unknown. */
  readonly exited: Promise<ProcessExit>;
  /** True when the helper started it. */
  readonly viaHelper: boolean;
}

/** A spawn that failed, as the OS reported it (`code` is its errno name, e.g. `ENOENT`, `E2BIG`). */
export class SpawnFailure extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

/** How many times a thread restarts a helper that died before it gives up and spawns directly. */
const MAX_HELPER_STARTS = 3;
/** While a helper starts, this many spawns go direct; the rest queue for it. */
const DIRECT_WHILE_STARTING = 2;
/**
 * Milliseconds after a thread's first spawn, with no second one, before its
 * helper starts: a single call (a CLI command) ends without ever paying for
 * the helper's fork and interpreter start on its two cores, and a second
 * spawn starts it at once.
 */
const HELPER_IDLE_START_MS = 250;

interface Waiting {
  file: string;
  args: string[];
  cwd: string;
  resolve(p: PipedProcess): void;
  reject(err: unknown): void;
  pid?: number;
  stdout?: Socket;
  exit?: { resolve(e: ProcessExit): void; reject(err: unknown): void };
}

interface HelperMessage {
  t: 'ready' | 'out' | 'err' | 'exit' | 'error';
  id?: number;
  pid?: number;
  code?: number | string | null;
  signal?: NodeJS.Signals | null;
  message?: string;
}

/** What a helper runs as: the Python one (posix_spawn) or the Node one. */
export type HelperKind = 'python' | 'node';

/** The name both helpers show in `ps`, before their engine's pid. */
export const HELPER_NAME = 'sluice-spawner';

/**
 * True when `cmdline` (a /proc/<pid>/cmdline with NULs as spaces) is a spawn
 * helper of the engine process `enginePid`: `sluice-spawner <pid>` (Node) or
 * `<python> -I -S -B <dir>/spawn-helper.py sluice-spawner <pid> <mark>`.
 */
export function isSpawnHelperOf(cmdline: string, enginePid: number): boolean {
  const words = cmdline.trim().split(/\s+/);
  const at = words.indexOf(HELPER_NAME);
  if (at === -1 || words[at + 1] !== String(enginePid)) return false;
  return at === 0 ? words.length === 2 : (words[at - 1] ?? '').endsWith('/spawn-helper.py');
}

const PYTHON_HELPER = fileURLToPath(new URL('./spawn-helper.py', import.meta.url));
const PYTHON_CANDIDATES = ['/usr/bin/python3', '/usr/local/bin/python3', '/bin/python3'];

/**
 * The interpreter for the Python helper, or undefined for the Node one.
 * Absolute paths only, never a PATH lookup: a version manager's shim there
 * is slow to start. Whether that Python can serve the helper finds out
 * itself, and says so by exiting before it is ready.
 */
function pythonInterpreter(): string | undefined {
  if (!regularFile(PYTHON_HELPER)) return undefined;
  const chosen = process.env.SLUICE_SPAWN_PYTHON;
  // The engine refuses any other value when it opens (engine/processes/spawn-settings.ts).
  if (chosen !== undefined) return isAbsolute(chosen) && executableFile(chosen) ? chosen : undefined;
  return PYTHON_CANDIDATES.find(executableFile);
}

/** True when `path` is a regular file (the helper script needs no execute bit: python reads it). */
function regularFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** One helper process and the requests it has not finished. */
class Helper {
  ready = false;
  dead = false;
  /** Spawns made directly while this helper was starting. */
  directWhileStarting = 0;
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting>();
  /** Put in the environment of every process this helper starts (workers/spawn-mark.ts). */
  private readonly mark = `${process.pid}-${randomBytes(8).toString('hex')}`;
  private readonly channel: ChildProcess;

  constructor(kind: HelperKind, python: string | undefined, onDead: (everReady: boolean) => void) {
    // Through sh, backgrounded: the helper is not our child, so its exit leaves no zombie here.
    const argv =
      kind === 'python'
        ? ['-c', '"$0" -I -S -B "$1" "$2" "$3" "$4" </dev/null &', python as string, PYTHON_HELPER, HELPER_NAME]
        : [
            '-c',
            '"$0" "$1" "$2" "$3" </dev/null &',
            process.execPath,
            fileURLToPath(new URL('./spawn-helper.js', import.meta.url)),
          ];
    this.channel = spawn('/bin/sh', [...argv, String(process.pid), this.mark], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      // A session of its own: a signal to the engine's group must not kill the helper (losing
      // processes it has not reported) or reach the calls' groups ahead of the engine's own.
      detached: true,
      // Without the Node variables it does not need: they slow its start (workers/helper-env.ts).
      env: helperEnv(process.env),
    });
    // The tools' environment, whole: sh passes on only the names it can hold.
    if (this.channel.pid !== undefined) this.channel.send({ t: 'env', env: { ...process.env } });
    // An idle helper must not keep its thread alive (see settled()).
    this.channel.unref();
    this.channel.channel?.unref();
    // sh could not start: with no pid there may be no channel, so no 'disconnect' ever.
    this.channel.on('error', () => {
      if (this.channel.pid === undefined) this.gone(onDead);
    });
    this.channel.on('message', (m: HelperMessage, handle?: Socket) => this.onMessage(m, handle));
    this.channel.on('disconnect', () => this.gone(onDead));
  }

  /** The helper ended (or never started): what it had not finished is settled (see the constructor). */
  private gone(onDead: (everReady: boolean) => void): void {
    if (this.dead) return;
    this.dead = true;
    const everReady = this.ready;
    this.ready = false;
    const waiting = [...this.waiting.values()];
    this.waiting.clear();
    onDead(everReady);
    // A helper never ready never read a request: those start directly. Otherwise a request may
    // have started its process, so it is never started again (that could run a command twice).
    if (everReady && waiting.length > 0) {
      // Unreported processes are known to no one: find them by the helper's mark first.
      void killMarked(this.mark)
        .catch(() => 0)
        .then(() => {
          for (const w of waiting) this.lost(w);
        });
      return;
    }
    for (const w of waiting) spawnDirect(w.file, w.args, w.cwd).then(w.resolve, w.reject);
  }

  /** Asks the helper to start `file args` in `cwd`. */
  spawn(file: string, args: string[], cwd: string): Promise<PipedProcess> {
    // 'disconnect' is on its way and a send now would be dropped: never sent, so start it here.
    if (this.channel.pid !== undefined && !this.channel.connected) return spawnDirect(file, args, cwd);
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.waiting.set(id, { file, args, cwd, resolve, reject });
      // A pending request keeps the thread alive, or a spawn waiting for the helper ends the loop.
      if (this.waiting.size === 1) this.channel.channel?.ref();
      // sh did not start: its 'error', on its way, starts this directly.
      if (this.channel.pid === undefined) return;
      // The Python helper changes its own directory for each spawn.
      this.channel.send({ t: 'spawn', id, file, args, cwd: absolutePath(cwd) });
    });
  }

  /** Request `id` is finished: with none left, the channel stops holding the thread. */
  private settled(id: number): void {
    this.waiting.delete(id);
    if (this.waiting.size === 0) this.channel.channel?.unref();
  }

  /** Ends the helper (it kills what it still runs). */
  close(): void {
    if (!this.dead && this.channel.connected) this.channel.disconnect();
  }

  private onMessage(m: HelperMessage, handle?: Socket): void {
    if (m.t === 'ready') {
      this.ready = true;
      return;
    }
    const w = m.id === undefined ? undefined : this.waiting.get(m.id);
    if (!w) {
      handle?.destroy();
      return;
    }
    switch (m.t) {
      case 'out':
        w.pid = m.pid;
        w.stdout = handle;
        return;
      case 'err': {
        const exited = new Promise<ProcessExit>((resolve, reject) => {
          w.exit = { resolve, reject };
        });
        // The helper may die before anyone listens.
        exited.catch(() => {});
        w.resolve({
          pid: w.pid as number,
          stdout: w.stdout as Socket,
          stderr: handle as Socket,
          exited,
          viaHelper: true,
        });
        return;
      }
      case 'exit':
        this.settled(m.id as number);
        w.exit?.resolve({ code: typeof m.code === 'number' ? m.code : null, signal: m.signal ?? null });
        return;
      case 'error':
        this.settled(m.id as number);
        w.reject(new SpawnFailure(m.message ?? 'spawn failed', typeof m.code === 'string' ? m.code : undefined));
        return;
    }
  }

  /** The helper died with `w` unfinished: kill its reported process, fail the call. */
  private lost(w: Waiting): void {
    const err = new ToolFailedError('the spawn helper process ended while the command ran');
    if (w.pid !== undefined) {
      try {
        process.kill(-w.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    if (w.exit) w.exit.reject(err);
    else {
      w.stdout?.destroy();
      w.reject(err);
    }
  }
}

let helper: Helper | undefined;
/** A helper start put off behind the direct spawns that asked for it (see spawnPiped). */
let startSoon: NodeJS.Immediate | undefined;
/** The start put off after a thread's first spawn, until {@link HELPER_IDLE_START_MS} pass or a second spawn comes. */
let startIdle: NodeJS.Timeout | undefined;
/** Spawns made directly while {@link startSoon} was pending. */
let directBeforeStart = 0;
let starts = 0;
/** This thread's Python helper interpreter, until one failed to come up (then the Node helper serves). */
let python = pythonInterpreter();
/** `SLUICE_SPAWN_HELPER`: `0` never uses a helper, `wait` sends even the first spawns to it (they wait for it to start). */
const MODE = process.env.SLUICE_SPAWN_HELPER;
let disabled = MODE === '0';

function currentHelper(): Helper | undefined {
  if (disabled) return undefined;
  if (helper && !helper.dead) return helper;
  if (starts >= MAX_HELPER_STARTS) {
    disabled = true;
    return undefined;
  }
  starts++;
  const kind: HelperKind = python ? 'python' : 'node';
  const h = new Helper(kind, python, (everReady) => {
    if (helper === h) helper = undefined;
    // One that worked may be started again; one that never came up would not next time either.
    // A Python one that cannot serve here gives way to the Node one.
    if (everReady) return;
    if (kind === 'python') {
      python = undefined;
      starts--;
    } else disabled = true;
  });
  helper = h;
  return h;
}

/** Spawns directly from this process: what the helper does, without it. */
function spawnDirect(file: string, args: string[], cwd: string): Promise<PipedProcess> {
  let child: ChildProcess;
  try {
    child = spawn(file, args, { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return Promise.reject(new SpawnFailure(e.message, e.code));
  }
  const exited = new Promise<ProcessExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  if (child.pid === undefined) {
    return new Promise((_, reject) =>
      child.once('error', (e: NodeJS.ErrnoException) => reject(new SpawnFailure(e.message, e.code))),
    );
  }
  child.on('error', () => {});
  return Promise.resolve({
    pid: child.pid,
    stdout: child.stdout as Readable,
    stderr: child.stderr as Readable,
    exited,
    viaHelper: false,
  });
}

/**
 * Starts `file args` in `cwd` as the leader of a new process group, stdin
 * from /dev/null, stdout and stderr piped here. Resolves once the process
 * exists (its pid known); rejects with {@link SpawnFailure} when it could
 * not start.
 */
export function spawnPiped(file: string, args: string[], cwd: string): Promise<PipedProcess> {
  // No helper yet: this spawn goes direct and the helper's fork waits a turn, so the caller has
  // reported the new group to the engine first (an engine dying during that fork would otherwise
  // leave the group running untracked).
  if (!disabled && MODE !== 'wait' && (!helper || helper.dead) && directBeforeStart < DIRECT_WHILE_STARTING) {
    directBeforeStart++;
    if (directBeforeStart === 1 && starts === 0) {
      // The thread's very first spawn may be its only one: the helper waits to be needed.
      startIdle ??= setTimeout(startHelper, HELPER_IDLE_START_MS).unref();
    } else {
      startSoon ??= setImmediate(startHelper);
    }
    return spawnDirect(file, args, cwd);
  }
  // The rest of a burst queue for the helper, which still starts after the direct spawns'
  // callers have gone on (setImmediate callbacks run in order).
  if (startSoon) return new Promise<void>((r) => setImmediate(r)).then(() => spawnPiped(file, args, cwd));
  const h = currentHelper();
  if (!h) return spawnDirect(file, args, cwd);
  if (h.ready) return h.spawn(file, args, cwd);
  // While it starts, the first calls go direct, but a burst waits: its direct spawns would keep
  // this thread too busy to hear the helper is up (start-up times: docs/benchmarks.md).
  if (MODE !== 'wait' && h.directWhileStarting < DIRECT_WHILE_STARTING) {
    h.directWhileStarting++;
    return spawnDirect(file, args, cwd);
  }
  return h.spawn(file, args, cwd);
}

/** Starts the helper (if one may run), counting the direct spawns made while it was put off. */
function startHelper(): void {
  if (startSoon) clearImmediate(startSoon);
  if (startIdle) clearTimeout(startIdle);
  startSoon = undefined;
  startIdle = undefined;
  const h = currentHelper();
  if (h) h.directWhileStarting += directBeforeStart;
  directBeforeStart = 0;
}

/** Ends this thread's helper, if any (tests; a thread's end closes it anyway). */
export function closeSpawnHelper(): void {
  if (startSoon) clearImmediate(startSoon);
  if (startIdle) clearTimeout(startIdle);
  startSoon = undefined;
  startIdle = undefined;
  directBeforeStart = 0;
  helper?.close();
  helper = undefined;
}
