/**
 * Which limit ended a sandboxed process, from what can be told after the
 * fact: its exit (bwrap exits 128 + the signal that killed the program) and
 * its cgroup's counters. A limit only RLIMITs enforce without a signal
 * (RLIMIT_AS's ENOMEM, RLIMIT_NPROC's EAGAIN, RLIMIT_NOFILE's EMFILE) fails a
 * system call inside the program and leaves no trace outside: those calls end
 * as the program's own failure.
 */
import { LimitExceededError } from '../../engine/protocol/errors.js';
import type { SandboxLimitName, SandboxLimits } from '../../engine/protocol/sandbox.js';
import { formatBytes } from '../../engine/protocol/units.js';
import type { GroupVerdict } from './cgroup.js';

/** How a sandboxed process ended, as `child_process` reports it. */
export interface SandboxExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** The limit that ended a process: ELIMIT's `details`. */
export interface LimitVerdict {
  readonly limit: SandboxLimitName;
  /** The limit as it was set (bytes, seconds or a count). */
  readonly value: number;
}

/** bwrap's exit status for a program killed by SIGXCPU (24). */
const EXIT_SIGXCPU = 128 + 24;
/** bwrap's exit status for a program killed by SIGXFSZ (25). */
const EXIT_SIGXFSZ = 128 + 25;

/**
 * The limit that ended a process which exited as `exit`, or undefined. The
 * cgroup's counters come first and hold whatever the exit: an OOM kill or a
 * refused fork inside is a limit hit even where the shell went on and exited
 * 0. A signal from an RLIMIT (SIGXCPU, SIGXFSZ) is seen only when it ended
 * the sandboxed command itself (docs/security.md, "Limits").
 */
export function limitVerdict(
  limits: SandboxLimits | undefined,
  exit: SandboxExit,
  group: GroupVerdict | undefined,
): LimitVerdict | undefined {
  if (!limits) return undefined;
  // A cgroup counter moved: some process in the sandbox hit the limit, even where the shell went on.
  if (group) return group;
  if (exit.code === 0 && exit.signal === null) return undefined;
  if (limits.cpuSeconds !== undefined && (exit.code === EXIT_SIGXCPU || exit.signal === 'SIGXCPU')) {
    return { limit: 'cpu', value: limits.cpuSeconds };
  }
  if (limits.fileSizeBytes !== undefined && (exit.code === EXIT_SIGXFSZ || exit.signal === 'SIGXFSZ')) {
    return { limit: 'fileSize', value: limits.fileSizeBytes };
  }
  return undefined;
}

/** The limit in words: `256.0 MiB`, `2 CPU seconds`, `64`. */
function limitValue(limit: SandboxLimitName, value: number): string {
  switch (limit) {
    case 'memory':
    case 'fileSize':
      return formatBytes(value);
    case 'cpu':
      return `${value} CPU ${value === 1 ? 'second' : 'seconds'}`;
    default:
      return String(value);
  }
}

/** ELIMIT's message: `limit memory (256.0 MiB) exceeded`. */
export function limitExceededMessage(verdict: LimitVerdict): string {
  return `limit ${verdict.limit} (${limitValue(verdict.limit, verdict.value)}) exceeded`;
}

/** The ELIMIT error of `verdict`, its details `{ limit, value }`. */
export function limitExceededError(verdict: LimitVerdict): LimitExceededError {
  return new LimitExceededError(limitExceededMessage(verdict), { limit: verdict.limit, value: verdict.value });
}
