/**
 * The bubblewrap command line that runs one tool process under a sandbox
 * policy (docs/security.md): mount, PID, network, IPC, UTS and cgroup
 * namespaces, a read-only root with the policy's writable paths bound back
 * and hidden ones covered, private /tmp, /dev and /proc, no capabilities.
 *
 * RLIMITs are set by `prlimit` inside, after the user namespace exists:
 * RLIMIT_NPROC counts per user and namespace, so outside it would bound
 * every process of the engine's user (and root is never checked, see
 * {@link processLimitWorks}). A limit a cgroup holds gets no RLIMIT: one
 * beside it would fail the program first with an unattributable error.
 */
import { realpathSync, type Stats, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { UnsupportedPlatformError } from '../../engine/protocol/errors.js';
import { envAllows, type SandboxLimits, type SandboxPolicy } from '../../engine/protocol/sandbox.js';
import { executableFile } from '../executable.js';

export type { SandboxLimits, SandboxPolicy } from '../../engine/protocol/sandbox.js';

/** The program and argument vector that run `file args` in `cwd` under `policy`. */
export interface SandboxedCommand {
  readonly file: string;
  readonly args: string[];
}

/** The limits a cgroup can hold for a sandbox, in place of RLIMIT_AS and RLIMIT_NPROC. */
export type CgroupLimit = 'memory' | 'processes';

/** How a sandboxed command's limits are held besides its RLIMITs. */
export interface SandboxCommandOptions {
  /** The limits a cgroup the process joins before bwrap holds: no RLIMIT for them, and a processes limit holds for root. */
  readonly cgroup?: readonly CgroupLimit[];
}

/** Where {@link onPath} last found a name on a PATH: every sandboxed spawn asks for bwrap again. */
const found = new Map<string, string>();

/**
 * The first executable `name` on `PATH`, or undefined. A hit is remembered
 * per PATH and checked again (one access call) instead of walking PATH on
 * every spawn; a program that went away is looked up afresh.
 */
export function onPath(name: string, path = process.env.PATH ?? ''): string | undefined {
  const key = `${name}\0${path}`;
  const known = found.get(key);
  if (known !== undefined && executableFile(known)) return known;
  found.delete(key);
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    if (executableFile(candidate)) {
      found.set(key, candidate);
      return candidate;
    }
  }
  return undefined;
}

/** False where RLIMIT_NPROC cannot bound a sandbox: the kernel skips it for a real uid of root. */
export function processLimitWorks(uid = process.getuid?.() ?? 0): boolean {
  return uid !== 0;
}

/**
 * `path` with its symlinks resolved and what it is, or undefined when it
 * does not exist. Most default hidden paths are absent on a given machine:
 * a stat that returns undefined costs no thrown error, and the native
 * realpath one call rather than an lstat per component (every sandboxed
 * spawn resolves them on the worker thread).
 */
function resolved(path: string): { path: string; stats: Stats } | undefined {
  try {
    const stats = statSync(path, { throwIfNoEntry: false });
    return stats ? { path: realpathSync.native(path), stats } : undefined;
  } catch {
    // EACCES and the like: what the engine's user cannot reach, its sandbox cannot either.
    return undefined;
  }
}

function real(path: string): string | undefined {
  return resolved(path)?.path;
}

/** The variables of `env` that `allowed` names (`PREFIX*` matches by prefix), in a stable order. */
export function allowedEnv(allowed: readonly string[], env: NodeJS.ProcessEnv): [string, string][] {
  return Object.entries(env)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .filter(([name]) => allowed.some((a) => envAllows(a, name)))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

function prlimitArgs(limits: SandboxLimits | undefined, cgroup: readonly CgroupLimit[]): string[] {
  if (!limits) return [];
  const out: string[] = [];
  const set = (flag: string, soft: number | undefined, hard = soft) => {
    if (soft !== undefined) out.push(`--${flag}=${soft}:${hard}`);
  };
  if (!cgroup.includes('memory')) set('as', limits.memoryBytes);
  // A second between soft and hard: SIGXCPU, which names the limit, arrives before SIGKILL.
  set('cpu', limits.cpuSeconds, limits.cpuSeconds === undefined ? undefined : limits.cpuSeconds + 1);
  if (!cgroup.includes('processes')) set('nproc', limits.processes);
  set('fsize', limits.fileSizeBytes);
  set('nofile', limits.openFiles);
  return out;
}

/**
 * The bwrap command line for `file args` in `cwd`. Throws EUNSUPPORTED,
 * naming what is missing (bwrap, prlimit, a way to hold a processes limit):
 * the caller never falls back to an unconfined run.
 */
export function sandboxCommand(
  policy: SandboxPolicy,
  file: string,
  args: readonly string[],
  cwd: string,
  env: NodeJS.ProcessEnv = process.env,
  uid = process.getuid?.() ?? 0,
  options: SandboxCommandOptions = {},
): SandboxedCommand {
  const cgroup = options.cgroup ?? [];
  const bwrap = onPath('bwrap', env.PATH);
  if (!bwrap) {
    throw new UnsupportedPlatformError('the sandbox needs bubblewrap: no `bwrap` on PATH', { missing: 'bwrap' });
  }
  const limits = prlimitArgs(policy.limits, cgroup);
  const prlimit = limits.length > 0 ? onPath('prlimit', env.PATH) : undefined;
  if (limits.length > 0 && !prlimit) {
    throw new UnsupportedPlatformError('sandbox limits need `prlimit` (util-linux) on PATH', { missing: 'prlimit' });
  }
  if (policy.limits?.processes !== undefined && !cgroup.includes('processes') && !processLimitWorks(uid)) {
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
    const r = resolved(p);
    if (!r) continue;
    out.push(...(r.stats.isDirectory() ? ['--tmpfs', r.path] : ['--ro-bind', '/dev/null', r.path]));
  }
  out.push('--unshare-all', ...(policy.network === 'on' ? ['--share-net'] : []));
  out.push('--die-with-parent', '--cap-drop', 'ALL', '--chdir', dir, '--clearenv');
  for (const [name, value] of allowedEnv(policy.env, env)) out.push('--setenv', name, value);
  out.push('--', ...(prlimit ? [prlimit, ...limits, '--'] : []), file, ...args);
  return { file: bwrap, args: out };
}
