/**
 * The bubblewrap command line that runs one tool process under a sandbox
 * policy (docs/security.md). The sandbox is built from mount, PID, network,
 * IPC, UTS and cgroup namespaces: the whole filesystem read-only with the
 * policy's writable paths bound back read-write and its hidden paths covered
 * by empty ones, a private /tmp, /dev and /proc, no capabilities (bwrap run
 * as root keeps them unless told otherwise), and only the allowed
 * environment.
 *
 * Limits go in as RLIMITs set by `prlimit` inside the sandbox, after its user
 * namespace exists: RLIMIT_NPROC counts processes per user and namespace, so
 * set there it bounds this sandbox, where set outside it would bound every
 * process of the engine's user. For a real uid of 0 the kernel never applies
 * RLIMIT_NPROC at all (see {@link processLimitWorks}).
 */
import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { UnsupportedPlatformError } from '../../engine/protocol/errors.js';

/** What a sandboxed process may touch. */
export interface SandboxPolicy {
  /** `read-only`: nothing writable but a private /tmp; `workspace-write`: also {@link workspace} and {@link writable}. */
  readonly filesystem: 'read-only' | 'workspace-write';
  /**
   * The directory writable under workspace-write: the host's setting, never
   * a tool argument. A process's working directory is only where it starts,
   * so a `cwd` argument of `/etc` makes nothing there writable.
   */
  readonly workspace: string;
  /** `off`: a network namespace of its own with only loopback; `on`: the host's network. */
  readonly network: 'off' | 'on';
  /** More paths bound read-write (workspace-write only). */
  readonly writable: readonly string[];
  /** Paths covered inside: a directory by an empty tmpfs, anything else by /dev/null. Missing ones are skipped. */
  readonly hidden: readonly string[];
  /** Names of the environment variables passed in; every other one is dropped. */
  readonly env: readonly string[];
  /** RLIMITs; absent ones stay as they are. */
  readonly limits?: SandboxLimits;
}

/** Per-process resource limits, applied with setrlimit inside the sandbox. */
export interface SandboxLimits {
  /** Address space in bytes (RLIMIT_AS): an allocation past it fails with ENOMEM. */
  readonly memoryBytes?: number;
  /** CPU seconds per process (RLIMIT_CPU): SIGXCPU at the limit, SIGKILL a second later. */
  readonly cpuSeconds?: number;
  /** Processes of the sandbox's user in the sandbox (RLIMIT_NPROC): a fork past it fails with EAGAIN. */
  readonly processes?: number;
  /** Largest file a process may write, in bytes (RLIMIT_FSIZE): SIGXFSZ past it. */
  readonly fileSizeBytes?: number;
  /** Open descriptors per process (RLIMIT_NOFILE): EMFILE past it. */
  readonly openFiles?: number;
}

/** The program and argument vector that run `file args` in `cwd` under `policy`. */
export interface SandboxedCommand {
  readonly file: string;
  readonly args: string[];
}

/** The first executable `name` on `PATH`, or undefined. */
export function onPath(name: string, path = process.env.PATH ?? ''): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/**
 * False where RLIMIT_NPROC cannot bound a sandbox: the kernel skips the check
 * for processes whose real user is root, in any user namespace.
 */
export function processLimitWorks(uid = process.getuid?.() ?? 0): boolean {
  return uid !== 0;
}

/** `path` with its symlinks resolved, or undefined when it does not exist. */
function real(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

function prlimitArgs(limits: SandboxLimits | undefined): string[] {
  if (!limits) return [];
  const out: string[] = [];
  const set = (flag: string, soft: number | undefined, hard = soft) => {
    if (soft !== undefined) out.push(`--${flag}=${soft}:${hard}`);
  };
  set('as', limits.memoryBytes);
  // A second between soft and hard: SIGXCPU, which names the limit, arrives before SIGKILL.
  set('cpu', limits.cpuSeconds, limits.cpuSeconds === undefined ? undefined : limits.cpuSeconds + 1);
  set('nproc', limits.processes);
  set('fsize', limits.fileSizeBytes);
  set('nofile', limits.openFiles);
  return out;
}

/**
 * The bwrap command line for `file args` in `cwd`. Throws EUNSUPPORTED,
 * naming what is missing, when bwrap (or, for limits, prlimit) is not on
 * PATH or a processes limit cannot hold; the caller never falls back to an
 * unconfined run.
 */
export function sandboxCommand(
  policy: SandboxPolicy,
  file: string,
  args: readonly string[],
  cwd: string,
  env: NodeJS.ProcessEnv = process.env,
  uid = process.getuid?.() ?? 0,
): SandboxedCommand {
  const bwrap = onPath('bwrap', env.PATH);
  if (!bwrap) {
    throw new UnsupportedPlatformError('the sandbox needs bubblewrap: no `bwrap` on PATH', { missing: 'bwrap' });
  }
  const limits = prlimitArgs(policy.limits);
  const prlimit = limits.length > 0 ? onPath('prlimit', env.PATH) : undefined;
  if (limits.length > 0 && !prlimit) {
    throw new UnsupportedPlatformError('sandbox limits need `prlimit` (util-linux) on PATH', { missing: 'prlimit' });
  }
  if (policy.limits?.processes !== undefined && !processLimitWorks(uid)) {
    throw new UnsupportedPlatformError('a processes limit cannot hold for an engine running as root (RLIMIT_NPROC)', {
      missing: 'processes-limit',
    });
  }
  const dir = real(cwd) ?? cwd;
  const workspace = real(policy.workspace);
  const out = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp'];
  // After the private /tmp: a workspace or working directory under /tmp must still be there.
  if (workspace) out.push(policy.filesystem === 'workspace-write' ? '--bind' : '--ro-bind', workspace, workspace);
  if (dir !== workspace && real(dir)) out.push('--ro-bind', dir, dir);
  if (policy.filesystem === 'workspace-write') {
    for (const p of policy.writable) {
      const r = real(p);
      if (r) out.push('--bind', r, r);
    }
  }
  // Last: a hidden path stays hidden inside a writable one (the store under the workspace).
  for (const p of policy.hidden) {
    const r = real(p);
    if (!r) continue;
    out.push(...(statSync(r).isDirectory() ? ['--tmpfs', r] : ['--ro-bind', '/dev/null', r]));
  }
  out.push('--unshare-all', ...(policy.network === 'on' ? ['--share-net'] : []));
  out.push('--die-with-parent', '--cap-drop', 'ALL', '--chdir', dir, '--clearenv');
  for (const name of policy.env) {
    const value = env[name];
    if (value !== undefined) out.push('--setenv', name, value);
  }
  out.push('--', ...(prlimit ? [prlimit, ...limits, '--'] : []), file, ...args);
  return { file: bwrap, args: out };
}
