/** What this machine can do for the sandbox (`sluice sandbox check`): bwrap, and how each limit holds. */
import { spawnSync } from 'node:child_process';
import { SANDBOX_LIMIT_NAMES, type SandboxLimitName } from '../../engine/protocol/sandbox.js';
import { onPath, processLimitWorks } from './bwrap.js';
import { type CgroupOptions, detectCgroup } from './cgroup.js';

/**
 * How a limit holds: `attributed` (past it, ELIMIT), `enforced` (the program
 * sees a failed system call, its own failure), `unavailable` (EUNSUPPORTED).
 */
export type LimitSupport = 'attributed' | 'enforced' | 'unavailable';

/** The sandbox support of this machine, for the engine's user. */
export interface SandboxSupport {
  /** True when a sandboxed process can be had: bwrap is on PATH and builds a sandbox. */
  readonly available: boolean;
  /** The engine's real uid. */
  readonly uid: number;
  readonly bwrap: {
    readonly path: string | null;
    /** The first line of `bwrap --version`. */
    readonly version: string | null;
    /** True when `bwrap --ro-bind / / --unshare-all --die-with-parent true` succeeded (user namespaces allowed). */
    readonly works: boolean;
    /** Why it did not: its first line on stderr, or the spawn error. */
    readonly error: string | null;
  };
  /** prlimit's path: RLIMITs (cpu, fileSize, openFiles; memory and processes without a cgroup) need it. */
  readonly prlimit: string | null;
  readonly cgroup: {
    readonly kind: 'v1' | 'v2' | 'none';
    /** True when memory limits go into a cgroup. */
    readonly memory: boolean;
    /** True when processes limits go into a cgroup (pids). */
    readonly pids: boolean;
    /** Why a controller cannot be used, one phrase each. */
    readonly reasons: readonly string[];
  };
  /** True when a processes limit can hold: a pids cgroup, or RLIMIT_NPROC for an engine not running as root. */
  readonly processesLimit: boolean;
  /** How each limit holds. */
  readonly limits: Readonly<Record<SandboxLimitName, LimitSupport>>;
}

/** Overrides for tests. */
export interface SupportOptions {
  /** Where bwrap and prlimit are looked up (`PATH`). @default `process.env` */
  readonly env?: NodeJS.ProcessEnv;
  /** @default `process.getuid()` */
  readonly uid?: number;
  /** @default this process's cgroups */
  readonly cgroup?: CgroupOptions;
}

function firstLine(text: string | Buffer | null | undefined): string | null {
  const line = String(text ?? '')
    .split('\n')[0]
    ?.trim();
  return line ? line : null;
}

let cached: SandboxSupport | undefined;

/** The support report; with no options, computed once per process (two short bwrap runs and a cgroup probe). */
export function sandboxSupport(opts: SupportOptions = {}): SandboxSupport {
  const defaults = opts.env === undefined && opts.uid === undefined && opts.cgroup === undefined;
  if (defaults && cached) return cached;
  const env = opts.env ?? process.env;
  const uid = opts.uid ?? process.getuid?.() ?? 0;
  const bwrapPath = onPath('bwrap', env.PATH) ?? null;
  let version: string | null = null;
  let works = false;
  let error: string | null = bwrapPath ? null : 'no bwrap on PATH';
  if (bwrapPath) {
    const v = spawnSync(bwrapPath, ['--version'], { encoding: 'utf8', timeout: 10_000 });
    version = firstLine(v.stdout);
    const run = spawnSync(bwrapPath, ['--ro-bind', '/', '/', '--unshare-all', '--die-with-parent', 'true'], {
      encoding: 'utf8',
      timeout: 10_000,
    });
    works = run.status === 0;
    if (!works) error = firstLine(run.stderr) ?? (run.error ? String(run.error) : `exit ${run.status ?? run.signal}`);
  }
  const prlimit = onPath('prlimit', env.PATH) ?? null;
  const found = detectCgroup(opts.cgroup);
  const memory = found.memory !== undefined;
  const pids = found.pids !== undefined;
  const rlimit: LimitSupport = prlimit ? 'attributed' : 'unavailable';
  const silent: LimitSupport = prlimit ? 'enforced' : 'unavailable';
  const processesLimit = pids || (prlimit !== null && processLimitWorks(uid));
  const limits = Object.fromEntries(SANDBOX_LIMIT_NAMES.map((n) => [n, 'unavailable'])) as Record<
    SandboxLimitName,
    LimitSupport
  >;
  limits.memory = memory ? 'attributed' : silent;
  limits.cpu = rlimit;
  limits.processes = pids ? 'attributed' : processesLimit ? 'enforced' : 'unavailable';
  limits.fileSize = rlimit;
  limits.openFiles = silent;
  const report: SandboxSupport = {
    available: works,
    uid,
    bwrap: { path: bwrapPath, version, works, error: works ? null : error },
    prlimit,
    cgroup: { kind: found.kind, memory, pids, reasons: found.reasons },
    processesLimit,
    limits,
  };
  if (defaults) cached = report;
  return report;
}
