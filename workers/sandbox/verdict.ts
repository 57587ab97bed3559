/**
 * Which limit ended a sandboxed process, from its exit (bwrap exits 128 +
 * the signal) and its cgroup's counters. An RLIMIT without a signal (ENOMEM,
 * EAGAIN, EMFILE) leaves no trace outside: the program's own failure.
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
 * cgroup's counters count whatever the exit (the shell may have gone on to
 * exit 0); an RLIMIT's signal only when it ended the command itself.
 */
export function limitVerdict(
  limits: SandboxLimits | undefined,
  exit: SandboxExit,
  group: GroupVerdict | undefined,
): LimitVerdict | undefined {
  if (!limits) return undefined;
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
