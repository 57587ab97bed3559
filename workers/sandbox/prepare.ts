/** Running a process in the sandbox: bwrap's command line, a limit group, and after the exit the verdict. */
import type { SandboxPolicy } from '../../engine/protocol/sandbox.js';
import { type SandboxedCommand, sandboxCommand } from './bwrap.js';
import { type CgroupOptions, openLimitGroup } from './cgroup.js';
import { type LimitVerdict, limitVerdict, type SandboxExit } from './verdict.js';

/** A sandboxed command ready to spawn, with what to do after it exits. */
export interface PreparedSandbox extends SandboxedCommand {
  /** The cgroup directories the process joins (empty: every limit is an RLIMIT). */
  readonly cgroups: readonly string[];
  /** The limit that ended the process, given how it exited; call before {@link release}. */
  verdict(exit: SandboxExit): LimitVerdict | undefined;
  /** Kills what is left in the process's cgroup and removes it. Idempotent; never rejects. Call once it exited, or when it could not be spawned. */
  release(): Promise<void>;
}

/** Overrides for tests and diagnostics. */
export interface PrepareOptions {
  /** The engine's real uid (RLIMIT_NPROC never holds for 0). @default `process.getuid()` */
  readonly uid?: number;
  /** Where to find cgroups, or `false` for RLIMITs alone. @default this process's cgroups */
  readonly cgroup?: CgroupOptions | false;
}

/** The command that runs `file args` in `cwd` under `policy`; throws EUNSUPPORTED as {@link sandboxCommand} does. */
export function prepareSandboxed(
  policy: SandboxPolicy,
  file: string,
  args: readonly string[],
  cwd: string,
  env: NodeJS.ProcessEnv = process.env,
  opts: PrepareOptions = {},
): PreparedSandbox {
  const group = opts.cgroup === false ? undefined : openLimitGroup(policy.limits, opts.cgroup);
  let cmd: SandboxedCommand;
  try {
    cmd = sandboxCommand(policy, file, args, cwd, env, opts.uid, { cgroup: group?.holds ?? [] });
  } catch (err) {
    // Nothing has joined the group: its first removal attempt, made before close() returns, succeeds.
    void group?.close();
    throw err;
  }
  const wrapped = group ? group.wrap(cmd) : cmd;
  return {
    file: wrapped.file,
    args: wrapped.args,
    cgroups: group?.dirs ?? [],
    verdict: (exit) => limitVerdict(policy.limits, exit, group?.exceeded()),
    release: () => group?.close() ?? Promise.resolve(),
  };
}

/** `file args` as they are, for a call without a sandbox: the same shape, with no verdict and nothing to release. */
export function unconfined(file: string, args: readonly string[]): PreparedSandbox {
  return {
    file,
    args: [...args],
    cgroups: [],
    verdict: () => undefined,
    release: () => Promise.resolve(),
  };
}
