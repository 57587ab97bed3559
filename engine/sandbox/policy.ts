/**
 * From a sandbox spec to the policy a call runs under: defaults applied,
 * paths absolute, and a call's spec narrowed against its engine's, so a call
 * can tighten the sandbox but never loosen it (docs/security.md).
 */
import { realpathSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { BadArgumentsError, BadOptionError, type SluiceError } from '../protocol/errors.js';
import { firstIssue } from '../protocol/issues.js';
import type { SandboxLimits, SandboxPolicy, SandboxSpec } from '../protocol/sandbox.js';
import { envAllows, sandboxSpecSchema } from '../protocol/sandbox.js';

/** What a shell needs, and nothing that holds a credential (AWS_*, SLUICE_*, tokens). */
export const DEFAULT_SANDBOX_ENV: readonly string[] = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'TERM',
  'COLORTERM',
  'NO_COLOR',
  'LANG',
  'LANGUAGE',
  'LC_*',
  'TZ',
];

/** Under HOME: where the usual credentials live (keys, cloud and registry logins). */
const HIDDEN_UNDER_HOME = [
  '.ssh',
  '.aws',
  '.config/gcloud',
  '.azure',
  '.gnupg',
  '.kube',
  '.docker',
  '.netrc',
  '.git-credentials',
];

/** Where the engine runs: what the defaults are made of. */
export interface SandboxContext {
  /** The engine's working directory: the default workspace, and what relative paths resolve against. */
  cwd: string;
  /** The engine user's home directory, whose credential directories are hidden. */
  home: string;
  /** The store's local directory (its blobs, sessions and server token), hidden. */
  storeRoot: string;
}

/** The paths hidden by default: the store (with the server token inside it) and the credential directories under HOME. */
export function defaultHidden(ctx: SandboxContext): string[] {
  return [ctx.storeRoot, ...HIDDEN_UNDER_HOME.map((p) => join(ctx.home, p))];
}

type Fail = (message: string, field: string) => SluiceError;
const optionError: Fail = (message, field) =>
  new BadOptionError(`option sandbox.${field}: ${message}`, { option: `sandbox.${field}` });
const argsError: Fail = (message, field) => new BadArgumentsError(`sandbox.${field}: ${message}`, { sandbox: field });

/** Validates a spec with zod; `fail` makes the typed error (EBADOPTION for the engine's, EBADARGS for a call's). */
function parseSpec(input: unknown, fail: Fail): SandboxSpec {
  const r = sandboxSpecSchema.safeParse(input);
  if (r.success) return r.data;
  const i = firstIssue(r.error, input);
  throw fail(`${i.message} (${i.got})`, i.path || '(sandbox)');
}

/** Validates the engine's `sandbox` option (EBADOPTION), before anything is opened. */
export function assertSandboxOption(input: unknown): void {
  if (input !== undefined) isOff(parseSpec(input, optionError), optionError);
}

/** Any spec is a sandbox (`{}` one with every default); only `filesystem: 'off'`, alone, runs unconfined. */
function isOff(spec: SandboxSpec, fail: Fail): boolean {
  const asked = Object.keys(spec).filter((k) => k !== 'filesystem' && spec[k as keyof SandboxSpec] !== undefined);
  if (spec.filesystem === 'off' && asked.length > 0) {
    throw fail(`filesystem "off" runs unconfined, so ${asked.join(', ')} cannot apply`, asked[0] as string);
  }
  return spec.filesystem === 'off';
}

function absolute(path: string, cwd: string): string {
  return isAbsolute(path) ? resolve(path) : resolve(cwd, path);
}

/**
 * The engine's policy from its `sandbox` option, or undefined for none.
 * EBADOPTION for an invalid spec.
 */
export function resolveSandbox(input: unknown, ctx: SandboxContext): SandboxPolicy | undefined {
  if (input === undefined) return undefined;
  return fromSpec(parseSpec(input, optionError), ctx, optionError);
}

function fromSpec(spec: SandboxSpec, ctx: SandboxContext, fail: Fail): SandboxPolicy | undefined {
  if (isOff(spec, fail)) return undefined;
  const policy: SandboxPolicy = {
    filesystem: spec.filesystem === 'read-only' ? 'read-only' : 'workspace-write',
    workspace: absolute(spec.workspace ?? ctx.cwd, ctx.cwd),
    network: spec.network ?? 'off',
    writable: (spec.writable ?? []).map((p) => absolute(p, ctx.cwd)),
    hidden: unique([...defaultHidden(ctx), ...(spec.hidden ?? []).map((p) => absolute(p, ctx.cwd))]),
    env: [...(spec.env ?? DEFAULT_SANDBOX_ENV)],
  };
  return spec.limits && Object.keys(spec.limits).length > 0 ? { ...policy, limits: { ...spec.limits } } : policy;
}

const FILESYSTEM_RANK = { off: 0, 'workspace-write': 1, 'read-only': 2 } as const;

/**
 * The policy a call runs under: the engine's narrowed by the call's own
 * `sandbox` option. EBADARGS, naming the field, for an invalid spec or one
 * that would loosen the engine's (a weaker filesystem mode, network on where
 * the engine has it off, a path outside the engine's writable ones, an
 * environment name the engine does not pass, a higher limit).
 */
export function narrowSandbox(
  engine: SandboxPolicy | undefined,
  input: unknown,
  ctx: SandboxContext,
): SandboxPolicy | undefined {
  if (input === undefined) return engine;
  const spec = parseSpec(input, argsError);
  if (!engine) return fromSpec(spec, ctx, argsError);
  if (spec.filesystem !== undefined && FILESYSTEM_RANK[spec.filesystem] < FILESYSTEM_RANK[engine.filesystem]) {
    throw argsError(
      `a call cannot loosen the engine's filesystem "${engine.filesystem}" to "${spec.filesystem}"`,
      'filesystem',
    );
  }
  if (spec.network === 'on' && engine.network === 'off') {
    throw argsError('a call cannot turn on the network the engine turned off', 'network');
  }
  const roots = [engine.workspace, ...engine.writable];
  const inside = (path: string, field: string): string => {
    const abs = absolute(path, ctx.cwd);
    if (!roots.some((root) => within(abs, root))) {
      throw argsError(`${JSON.stringify(path)} is outside the engine's workspace and writable paths`, field);
    }
    return abs;
  };
  const env = spec.env ?? engine.env;
  for (const name of env) {
    if (!engine.env.some((allowed) => envAllows(allowed, name))) {
      throw argsError(`the engine does not pass ${JSON.stringify(name)} into its sandbox`, 'env');
    }
  }
  const filesystem = spec.filesystem === 'read-only' ? 'read-only' : engine.filesystem;
  const limits = narrowLimits(engine.limits, spec.limits);
  return {
    filesystem,
    workspace: spec.workspace !== undefined ? inside(spec.workspace, 'workspace') : engine.workspace,
    network: spec.network ?? engine.network,
    writable: spec.writable !== undefined ? spec.writable.map((p) => inside(p, 'writable')) : [...engine.writable],
    hidden: unique([...engine.hidden, ...(spec.hidden ?? []).map((p) => absolute(p, ctx.cwd))]),
    env: [...env],
    ...(limits ? { limits } : {}),
  };
}

function narrowLimits(engine: SandboxLimits | undefined, call: SandboxLimits | undefined): SandboxLimits | undefined {
  const out: Record<string, number> = { ...engine };
  for (const [name, value] of Object.entries(call ?? {})) {
    if (value === undefined) continue;
    const bound = (engine as Record<string, number | undefined> | undefined)?.[name];
    if (bound !== undefined && value > bound) {
      throw argsError(`a call cannot raise the engine's limit ${name} of ${bound} to ${value}`, `limits.${name}`);
    }
    out[name] = value;
  }
  return Object.keys(out).length > 0 ? (out as SandboxLimits) : undefined;
}

/**
 * True when `path` is `root` or below it, symlinks resolved where they
 * exist: a workspace symlink pointing at /etc is not inside the workspace.
 */
function within(path: string, root: string): boolean {
  const rel = relative(real(root), real(path));
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/** The path with its symlinks resolved, as far up as it exists. */
function real(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    const parent = resolve(path, '..');
    return parent === path ? path : join(real(parent), relative(parent, path));
  }
}

function unique(paths: string[]): string[] {
  return [...new Set(paths)];
}
