/**
 * The built-in `bash` tool: runs `bash -c <command>` in its own process
 * group, piping stdout and stderr into streams of those names; the engine
 * owns capture. Exit 0 is success; another exit or a signal is `failed`
 * with complete output; `timeout` fails with ETIMEOUT and incomplete
 * output. Only the display decodes the bytes.
 */
import { existsSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { BadArgumentsError, serializeError, TimeoutError, ToolFailedError } from '../../engine/protocol/errors.js';
import { MAX_TIMER_MS } from '../../engine/protocol/limits.js';
import { formatBytes } from '../../engine/protocol/units.js';
import { PipeGather } from '../pipe-gather.js';
import { type LimitVerdict, limitExceededError, limitExceededMessage } from '../sandbox/verdict.js';
import { type PipedProcess, type ProcessExit, spawnPiped } from '../spawner.js';
import { complete, defineTool, type ToolContext, z } from '../tool.js';

/** Live display: the first whole lines of output verbatim (up to 4 KiB), then the newest line at most this often. */
const PROGRESS_EVERY_MS = 500;
const VERBATIM_DISPLAY_BYTES = 4096;
const LATEST_LINE_BYTES = 512;
/** After SIGTERM on cancellation, SIGKILL follows this much later. */
const KILL_AFTER_MS = 500;
/** After bash exits, how long its pipes may take to reach end of file before the group is killed. */
const DRAIN_MS = 250;

/** A failed spawn is no disk error: too long a command or a missing cwd is EBADARGS, else ETOOLFAILED. */
function spawnError(err: unknown, command: string, cwd: string): Error {
  const code = (err as { code?: unknown })?.code;
  const message = (err as Error)?.message ?? String(err);
  if (code === 'E2BIG') {
    return new BadArgumentsError(`the command is too long to run (${Buffer.byteLength(command)} bytes): ${message}`, {
      errno: code,
    });
  }
  if (code === 'ENOENT' && !existsSync(cwd)) {
    return new BadArgumentsError(`the working directory ${JSON.stringify(cwd)} does not exist`, { errno: code });
  }
  return new ToolFailedError(`bash could not be started: ${message}`, {
    errno: typeof code === 'string' ? code : null,
  });
}

/** A display writer: the first whole lines of output verbatim, then the newest line at most every {@link PROGRESS_EVERY_MS}. */
function liveDisplay(ctx: ToolContext): (chunk: Buffer) => void {
  let shown = 0;
  // Decodes across chunks, so a character split between two reads shows whole.
  const shownText = new StringDecoder('utf8');
  let lastProgress = Date.now();
  return (chunk) => {
    if (shown < VERBATIM_DISPLAY_BYTES) {
      // Whole lines only: a line cut by the budget would look like real output (`104` of `1040`).
      const room = chunk.subarray(0, VERBATIM_DISPLAY_BYTES - shown);
      const cut = room.length < chunk.length ? room.lastIndexOf(0x0a) + 1 : room.length;
      shown = cut === room.length ? shown + cut : VERBATIM_DISPLAY_BYTES;
      if (cut > 0) ctx.display(shownText.write(room.subarray(0, cut)));
      if (shown >= VERBATIM_DISPLAY_BYTES) ctx.display('…\n');
      return;
    }
    const now = Date.now();
    if (now - lastProgress < PROGRESS_EVERY_MS) return;
    lastProgress = now;
    // The newest complete line (the engine's progress events carry the byte counts).
    const end = chunk.lastIndexOf(0x0a);
    if (end === -1) return;
    const start = chunk.lastIndexOf(0x0a, end - 1) + 1;
    const line = chunk.subarray(start, Math.min(end, start + LATEST_LINE_BYTES)).toString('utf8');
    ctx.display(`${line}${end - start > LATEST_LINE_BYTES ? '…' : ''}\n`);
  };
}

/**
 * Waits for bash to exit and its pipes to drain, killing its group on
 * timeout, cancellation and at the end (grandchildren must not outlive the
 * call). Rejects, the group killed, when a pipe failed or the helper died.
 */
async function waitForEnd(
  child: PipedProcess,
  pipes: Promise<unknown>[],
  timeout: number | undefined,
  signal: AbortSignal,
): Promise<ProcessExit & { timedOut: boolean }> {
  let timedOut = false;
  let killTimer: NodeJS.Timeout | undefined;
  const killGroup = (sig: NodeJS.Signals) => {
    try {
      process.kill(-child.pid, sig);
    } catch {
      // The group is already gone.
    }
  };
  const stop = () => {
    killGroup('SIGTERM');
    killTimer = setTimeout(() => killGroup('SIGKILL'), KILL_AFTER_MS);
  };
  const timer =
    timeout !== undefined
      ? setTimeout(() => {
          timedOut = true;
          killGroup('SIGKILL');
        }, timeout)
      : undefined;
  signal.addEventListener('abort', stop, { once: true });
  // Cancelled while the process was starting: the listener above came too late to hear it.
  if (signal.aborted) stop();
  let pumpError: unknown;
  const pumping = Promise.all(pipes).then(
    () => true,
    (e: unknown) => {
      pumpError = e;
      // Nobody reads the pipes any more: the child must not block on them forever.
      killGroup('SIGKILL');
      return true;
    },
  );
  const settle = () => {
    clearTimeout(timer);
    clearTimeout(killTimer);
    signal.removeEventListener('abort', stop);
  };
  let ended: ProcessExit;
  try {
    ended = await child.exited;
  } catch (e) {
    // The spawn helper died, and with it what the process's end was (its group is killed).
    settle();
    await pumping;
    throw e;
  }
  // A background process holding the pipes would keep them open forever: once bash exited they
  // get a moment to drain, then the group ends.
  let drainTimer: NodeJS.Timeout | undefined;
  const drained = await Promise.race([
    pumping,
    new Promise<false>((r) => {
      drainTimer = setTimeout(() => r(false), DRAIN_MS);
    }),
  ]);
  clearTimeout(drainTimer);
  if (!drained) killGroup('SIGKILL');
  await pumping;
  settle();
  killGroup('SIGKILL');
  if (pumpError !== undefined) throw pumpError;
  return { ...ended, timedOut };
}

/** The completion for how bash ended: a timeout or a sandbox limit is the call's typed error, its output kept. */
function completion(
  args: { command: string; timeout?: number | undefined },
  ended: ProcessExit & { timedOut: boolean },
  limit: LimitVerdict | undefined,
  sizes: { out: number; err: number; durationMs: number },
) {
  const { code, signal, timedOut } = ended;
  const ok = code === 0 && !timedOut && !limit;
  const how = timedOut
    ? `timed out after ${args.timeout} ms`
    : limit
      ? limitExceededMessage(limit)
      : signal
        ? `killed by ${signal}`
        : `exit code ${code}`;
  const error = timedOut
    ? serializeError(new TimeoutError(`the command ${how}`))
    : limit
      ? serializeError(limitExceededError(limit))
      : undefined;
  const display = [
    `$ ${args.command}`,
    `${how} · stdout ${formatBytes(sizes.out)} · stderr ${formatBytes(sizes.err)} · ${(sizes.durationMs / 1000).toFixed(2)} s`,
  ].join('\n');
  return complete.streamed({
    status: ok ? 'success' : 'failed',
    // A timeout or a limit cut the command short: its output is incomplete, and the code says why.
    ...(error ? { error } : {}),
    display,
    ...(ok ? {} : { note: how }),
    metadata: {
      exitCode: code,
      signal,
      timedOut,
      durationMs: sizes.durationMs,
      stdoutBytes: sizes.out,
      stderrBytes: sizes.err,
    },
  });
}

export default defineTool({
  name: 'bash',
  description:
    'Runs a bash command. Its stdout and stderr are captured as separate streams; long output shows its first and last lines, with a read hint for the omitted middle.',
  args: z.object({
    command: z.string().min(1).describe('The command, run as bash -c <command>'),
    timeout: z
      .number()
      .int()
      .positive()
      .max(MAX_TIMER_MS)
      .optional()
      .describe('Milliseconds before the command is killed (at most 2147483647)'),
    cwd: z.string().min(1).optional().describe('Working directory (default: the engine working directory)'),
  }),
  output: ['stdout', 'stderr'],
  // A build or test run prints its verdict last: the tail is what a head-only preview would hide.
  preview: 'head+tail',
  prepare(args, ctx) {
    return { kind: 'process.spawn', command: args.command, cwd: args.cwd ?? ctx.cwd };
  },
  async run(args, ctx) {
    const started = Date.now();
    const cwd = args.cwd ?? ctx.cwd;
    // bwrap would report a missing directory as its own exit 1: say what is wrong, as a direct spawn does.
    if (ctx.sandbox && !existsSync(cwd)) {
      throw new BadArgumentsError(`the working directory ${JSON.stringify(cwd)} does not exist`, { errno: 'ENOENT' });
    }
    // The sandbox's command, or bash itself; EUNSUPPORTED here means it must not run at all.
    const sandbox = ctx.sandboxed('bash', ['-c', args.command], cwd);
    let child: PipedProcess;
    try {
      // Its own process group (the pid is the group's id), so the whole tree can be killed.
      child = await spawnPiped(sandbox.file, sandbox.args, cwd);
    } catch (err) {
      await sandbox.release();
      throw spawnError(err, args.command, cwd);
    }
    // Reported at once: a call that ends in the meantime, its worker terminated, must still kill this group.
    ctx.trackProcessGroup(child.pid);
    // Their 'data' listeners start the pipes flowing: nothing may await between the spawn and here.
    const show = liveDisplay(ctx);
    const out = new PipeGather(child.stdout, ctx.stream('stdout'), show);
    const err = new PipeGather(child.stderr, ctx.stream('stderr'), show);
    let ended: ProcessExit & { timedOut: boolean };
    try {
      ended = await waitForEnd(child, [out.done, err.done], args.timeout, ctx.signal);
    } catch (e) {
      await sandbox.release();
      throw e;
    }
    // Read before the release, which removes the cgroup whose counters it reads.
    const limit = sandbox.verdict(ended);
    await sandbox.release();
    return completion(args, ended, limit, { out: out.bytes, err: err.bytes, durationMs: Date.now() - started });
  },
});
