/**
 * The sandbox policy's two forms: what a host or a call asks for
 * ({@link SandboxSpec}, validated here) and what a tool process runs under
 * ({@link SandboxPolicy}: every default applied, paths absolute), which
 * travels to the worker with the call and is recorded with its result.
 */
import { SANDBOX_FILESYSTEM_MODES, SANDBOX_NETWORK_MODES } from './sandbox-modes.js';
import { z } from './zod.js';

export { SANDBOX_FILESYSTEM_MODES, SANDBOX_NETWORK_MODES };
/** The names of the limits, as `ELIMIT`'s `details.limit` gives them. */
export const SANDBOX_LIMIT_NAMES = ['memory', 'cpu', 'processes', 'fileSize', 'openFiles'] as const;

export type SandboxFilesystem = (typeof SANDBOX_FILESYSTEM_MODES)[number];
export type SandboxNetwork = (typeof SANDBOX_NETWORK_MODES)[number];
export type SandboxLimitName = (typeof SANDBOX_LIMIT_NAMES)[number];

/** Per-process resource limits; exceeding one ends the call with ELIMIT where the engine can tell (docs/security.md). */
export interface SandboxLimits {
  /** Memory in bytes: the sandbox's cgroup where one can be had, else each process's address space (RLIMIT_AS). */
  memoryBytes?: number;
  /** CPU seconds per process (RLIMIT_CPU): SIGXCPU at the limit, SIGKILL a second later. */
  cpuSeconds?: number;
  /** Processes in the sandbox: the cgroup's pids.max where one can be had, else RLIMIT_NPROC in its user namespace. */
  processes?: number;
  /** Largest file a process may write, in bytes (RLIMIT_FSIZE): SIGXFSZ past it. */
  fileSizeBytes?: number;
  /** Open descriptors per process (RLIMIT_NOFILE): EMFILE past it. */
  openFiles?: number;
}

/** A sandbox as a host (engine option, config file, CLI) or a call asks for it. Every field is optional. */
export interface SandboxSpec {
  /** @default `'off'` for the engine; a call's default is the engine's */
  filesystem?: SandboxFilesystem;
  /** @default `'off'` whenever the filesystem is sandboxed */
  network?: SandboxNetwork;
  /** The directory writable under `workspace-write`. @default the engine's `cwd`; a call's must lie inside the engine's */
  workspace?: string;
  /** More paths writable under `workspace-write`; a call's must lie inside the engine's workspace or writable paths. */
  writable?: string[];
  /** Paths to hide, besides the defaults (the store, the server token, `~/.ssh`, `~/.aws`, `~/.config/gcloud`, ...). */
  hidden?: string[];
  /** Names of environment variables passed in (a trailing `*` matches a prefix). @default a shell's (PATH, HOME, LANG, ...); a call's narrows the engine's */
  env?: string[];
  /** Resource limits; a call's may only lower the engine's. */
  limits?: SandboxLimits;
}

/** What a sandboxed process runs under: the resolved form of a {@link SandboxSpec}. */
export interface SandboxPolicy {
  /** `read-only`: nothing writable but a private /tmp; `workspace-write`: also {@link workspace} and {@link writable}. */
  filesystem: 'read-only' | 'workspace-write';
  /**
   * The directory writable under workspace-write: the host's setting, never
   * a tool argument. A process's working directory is only where it starts,
   * so a `cwd` argument of `/etc` makes nothing there writable.
   */
  workspace: string;
  network: SandboxNetwork;
  /** More paths bound read-write (workspace-write only). */
  writable: string[];
  /** Paths covered inside: a directory by an empty tmpfs, anything else by /dev/null. Missing ones are skipped. */
  hidden: string[];
  /** Names (or `PREFIX*` patterns) of the environment variables passed in; every other one is dropped. */
  env: string[];
  /** Limits; absent ones stay as they are. */
  limits?: SandboxLimits;
}

/**
 * True when the allow-list entry `allowed` (a name, or `PREFIX*`) lets
 * `name` through; `name` may itself be a pattern, as when a call's list is
 * checked against its engine's.
 */
export function envAllows(allowed: string, name: string): boolean {
  return allowed.endsWith('*') ? name.startsWith(allowed.slice(0, -1)) : allowed === name;
}

const path = z.string().min(1);
const count = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*\*?$/, 'an environment variable name, or a PREFIX* pattern');

/** Zod schema of a {@link SandboxSpec}, strict: an unknown field is an error, not ignored. */
export const sandboxSpecSchema = z.strictObject({
  filesystem: z.enum(SANDBOX_FILESYSTEM_MODES).optional(),
  network: z.enum(SANDBOX_NETWORK_MODES).optional(),
  workspace: path.optional(),
  writable: z.array(path).max(256).optional(),
  hidden: z.array(path).max(256).optional(),
  env: z.array(envName).max(1024).optional(),
  limits: z
    .strictObject({
      memoryBytes: count.min(1024 * 1024).optional(),
      cpuSeconds: count.max(366 * 24 * 3600).optional(),
      processes: count.optional(),
      fileSizeBytes: count.optional(),
      openFiles: count
        .min(8)
        .max(1024 * 1024)
        .optional(),
    })
    .optional(),
});

/** Zod schema of a {@link SandboxPolicy} as it is recorded with a result and crosses to a worker. */
export const sandboxPolicySchema = z.strictObject({
  filesystem: z.enum(['read-only', 'workspace-write']),
  workspace: path,
  network: z.enum(SANDBOX_NETWORK_MODES),
  writable: z.array(path),
  hidden: z.array(path),
  env: z.array(z.string()),
  limits: sandboxSpecSchema.shape.limits,
});
