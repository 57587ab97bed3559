/**
 * Starting a tool's process from a worker thread, with its stdout and stderr
 * piped back: through this thread's spawn helper (workers/spawn-helper.ts)
 * once it is up, directly until then and wherever it cannot run.
 *
 * A spawn from the engine's process copies the page tables of all its
 * memory (every worker thread's heap included); one from the helper copies
 * a bare Node's. The pipes come back to this thread over the helper's IPC
 * channel (their descriptors travel, the bytes never pass through the
 * helper), so capture is unchanged: the same sockets Node's own `spawn`
 * would have given, read here.
 *
 * There are two helpers with one protocol. Where a system Python 3.9+ is
 * found (/usr/bin/python3, /usr/local/bin/python3, /bin/python3, or
 * `SLUICE_SPAWN_PYTHON`), the helper is workers/spawn-helper.py, which
 * starts processes with posix_spawn: no page tables copied at all, so a
 * spawn costs its CPU a tenth of a fork from a bare Node and the tool
 * process no copy to tear down at exec (docs/benchmarks.md, "Small calls
 * and spawning"). Otherwise (or when that one cannot run) it is the Node helper,
 * workers/spawn-helper.ts. `SLUICE_SPAWN_PYTHON=` (empty) picks the Node one.
 *
 * `SLUICE_SPAWN_HELPER=0` in the engine's environment turns the helper off
 * (every spawn direct, as before it existed); `SLUICE_SPAWN_HELPER=wait`
 * sends every spawn to it, the first ones waiting for it to start (by
 * default they start directly meanwhile).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, constants, statSync } from 'node:fs';
import type { Socket } from 'node:net';
import { resolve as absolutePath, isAbsolute } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { ToolFailedError } from '../engine/protocol/errors.js';
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

function executableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * The interpreter for the Python helper, or undefined for the Node one:
 * `SLUICE_SPAWN_PYTHON` when set (empty: none), else the first system
 * Python of {@link PYTHON_CANDIDATES}. Absolute paths only, never a PATH
 * lookup: a version manager's shim there is a shell script that takes ~100 ms
 * to start a Python. Whether that Python can serve (3.9+, Linux 5.3+) the
 * helper itself finds out, and says so by exiting before it is ready.
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
    // Through sh, backgrounded: the helper is not this process's child, so its exit leaves no
    // zombie here even when the thread that started it is gone. The channel's descriptor is
    // inherited by the helper; sh exits at once.
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
      // A session of its own: a signal to the engine's process group (`kill -- -pgid`, `timeout`)
      // does not reach the helper, which would otherwise die beside the engine with processes it
      // had started and not yet reported, or SIGKILL every call's group ahead of the engine's own
      // SIGTERM-then-SIGKILL. It still ends with its channel, however the engine ends.
      detached: true,
      // Without the Node variables it does not need (its start-up ~30 ms shorter with a CA
      // bundle in NODE_EXTRA_CA_CERTS; workers/helper-env.ts).
      env: helperEnv(process.env),
    });
    // The tools' environment, whole, ahead of any request: what a direct spawn would give them.
    // sh passes on only the names it can hold, so it cannot come through the helper's own. (No pid:
    // sh did not start, there is no channel; see the 'error' handler.)
    if (this.channel.pid !== undefined) this.channel.send({ t: 'env', env: { ...process.env } });
    // Unreferenced while idle: an idle helper must not keep its thread alive (see settled()).
    this.channel.unref();
    this.channel.channel?.unref();
    // sh could not be started (EMFILE, EAGAIN, ...): with no pid there may be no channel, and so no
    // 'disconnect' ever. The helper is gone before it was ever up.
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
    // A helper that never said it was ready never read a request (it says so before it reads
    // any): those are started directly. Otherwise a request may have started its process, so
    // it is never started again (that could run a command twice).
    if (everReady && waiting.length > 0) {
      // A request the helper had not reported (or a process that left its group) is known to no
      // one: its processes are found by the helper's mark. The calls fail once that is done.
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
    // The channel has closed and its 'disconnect' is on its way: a send now would be dropped, and
    // the request counted as possibly started. It was never sent, so it is started directly.
    if (this.channel.pid !== undefined && !this.channel.connected) return spawnDirect(file, args, cwd);
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.waiting.set(id, { file, args, cwd, resolve, reject });
      // A request keeps the thread alive until it is answered: in a process with nothing else
      // running, a spawn waiting for its helper to come up would otherwise end the event loop.
      if (this.waiting.size === 1) this.channel.channel?.ref();
      // sh did not start: there is no channel to send on; its 'error', on its way, starts this directly.
      if (this.channel.pid === undefined) return;
      // Absolute: the Python helper changes its own directory for each spawn.
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
        // Nobody may be listening yet when the helper dies: the rejection is still handled.
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

  /**
   * The helper died with `w` unfinished. A process it had started and reported is killed here
   * (nothing else would end it); the call learns that its process's end is unknown.
   */
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
    // A helper that worked and then ended (e.g. it was killed) may be started again; one that
    // never came up would not come up next time either. A Python one that cannot serve here
    // (too old, no pidfd_open, not there at all) gives way to the Node one.
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
  // No helper yet (this thread's first spawn, or its helper ended): this one starts directly and
  // the helper's own fork waits for the next turn of the event loop. By then the caller has
  // reported the new group to the engine (its continuation runs first), so the engine does not
  // learn of the group only after that fork: a window in which the engine's death would leave the
  // group to run. The spawn counts as one of those made directly while the helper starts.
  if (!disabled && MODE !== 'wait' && (!helper || helper.dead) && directBeforeStart < DIRECT_WHILE_STARTING) {
    directBeforeStart++;
    startSoon ??= setImmediate(startHelper);
    return spawnDirect(file, args, cwd);
  }
  // More in the same run (a burst): they queue for the helper, which still starts only after the
  // direct spawns' callers have gone on (setImmediate callbacks run in order, this one after
  // startHelper).
  if (startSoon) return new Promise<void>((r) => setImmediate(r)).then(() => spawnPiped(file, args, cwd));
  const h = currentHelper();
  if (!h) return spawnDirect(file, args, cwd);
  if (h.ready) return h.spawn(file, args, cwd);
  // Starting (a Python helper takes ~20-40 ms to come up, a Node one ~50-150): the first calls do
  // not wait for it, but a burst does, since its direct spawns would keep this thread too busy to
  // hear the helper is up.
  if (MODE !== 'wait' && h.directWhileStarting < DIRECT_WHILE_STARTING) {
    h.directWhileStarting++;
    return spawnDirect(file, args, cwd);
  }
  return h.spawn(file, args, cwd);
}

/** Starts the helper (if one may run), counting the direct spawns made while it was put off. */
function startHelper(): void {
  startSoon = undefined;
  const h = currentHelper();
  if (h) h.directWhileStarting += directBeforeStart;
  directBeforeStart = 0;
}

/** Ends this thread's helper, if any (tests; a thread's end closes it anyway). */
export function closeSpawnHelper(): void {
  if (startSoon) clearImmediate(startSoon);
  startSoon = undefined;
  directBeforeStart = 0;
  helper?.close();
  helper = undefined;
}
