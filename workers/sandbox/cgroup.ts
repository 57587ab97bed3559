/**
 * A cgroup per sandboxed process for the limits RLIMITs cannot attribute or
 * hold: memory (an OOM kill is counted; RLIMIT_AS only fails an allocation)
 * and processes (the pids controller holds for root too). Groups are
 * children of the engine's cgroup: on v1 in the memory and pids
 * hierarchies, on v2 only where `cgroup.subtree_control` already enables the
 * controller (v2 refuses controllers in a cgroup holding processes, and
 * moving the engine's processes is not ours to do). A `sh` writes its own
 * pid into each `cgroup.procs` and execs bwrap, so the whole sandbox is born
 * inside. Names carry the engine's pid, so a later engine can reap a killed
 * engine's empty groups.
 */
import { mkdirSync, readdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';
import type { SandboxLimits } from '../../engine/protocol/sandbox.js';
import type { CgroupLimit, SandboxedCommand } from './bwrap.js';

/** The file operations on a cgroup filesystem; a test substitutes a directory tree that behaves like one. */
export interface CgroupFiles {
  mkdir(path: string): void;
  rmdir(path: string): void;
  readdir(path: string): string[];
  read(path: string): string;
  /** Writes an existing control file (never creates one). */
  write(path: string, text: string): void;
  exists(path: string): boolean;
}

/** The real filesystem. */
export const CGROUP_FILES: CgroupFiles = {
  mkdir: (p) => mkdirSync(p),
  rmdir: (p) => rmdirSync(p),
  readdir: (p) => readdirSync(p),
  read: (p) => readFileSync(p, 'utf8'),
  write: (p, text) => writeFileSync(p, text, { flag: 'r+' }),
  exists: (p) => {
    try {
      statSync(p);
      return true;
    } catch {
      return false;
    }
  },
};

/** Where to look for cgroups; every field has the running process's default. */
export interface CgroupOptions {
  /** Where the cgroup filesystems are mounted. @default `'/sys/fs/cgroup'` */
  readonly root?: string;
  /** The text of `/proc/self/cgroup`. @default read from /proc/self/cgroup */
  readonly self?: string;
  /** The engine's pid, which group names carry. @default `process.pid` */
  readonly pid?: number;
  /** The file operations. @default {@link CGROUP_FILES} */
  readonly files?: CgroupFiles;
}

/** Which cgroup version the engine is under, and where it may make groups for each limit. */
export interface CgroupDetection {
  /** `none`: no cgroup filesystem with a memory or pids controller for this process. */
  readonly kind: 'v1' | 'v2' | 'none';
  /** The directory under which memory groups can be made, when usable. */
  readonly memory?: string;
  /** The directory under which pids groups can be made, when usable. */
  readonly pids?: string;
  /** Why a controller is not usable, one phrase each. */
  readonly reasons: readonly string[];
}

/** The exceeded limit of a group, read after its processes exited. */
export interface GroupVerdict {
  readonly limit: CgroupLimit;
  /** The limit as it was asked for (bytes or processes). */
  readonly value: number;
}

/** A cgroup (one directory per v1 hierarchy) that one sandboxed process runs in. */
export interface LimitGroup {
  readonly kind: 'v1' | 'v2';
  /** The limits this group holds; the caller sets RLIMITs for the others. */
  readonly holds: readonly CgroupLimit[];
  /** The group's directories. */
  readonly dirs: readonly string[];
  /** `cmd` prefixed by the `sh` that joins this group and then execs it. */
  wrap(cmd: SandboxedCommand): SandboxedCommand;
  /** The limit the group's processes hit, read from its counters (call after the process exited). */
  exceeded(): GroupVerdict | undefined;
  /** SIGKILLs whatever is left in the group and removes it. Idempotent; never rejects. */
  close(): Promise<void>;
}

/** bwrap's outer process: outside the sandbox's PID namespace, inside its cgroup. */
const BWRAP_PROCESSES = 1;

const GROUP_NAME = /^sluice-(\d+)-\d+-(?:\d+|probe)$/;
let serial = 0;
const reaped = new Set<string>();

function optionsOf(opts: CgroupOptions) {
  return {
    root: opts.root ?? '/sys/fs/cgroup',
    pid: opts.pid ?? process.pid,
    files: opts.files ?? CGROUP_FILES,
  };
}

function selfCgroup(opts: CgroupOptions): string {
  if (opts.self !== undefined) return opts.self;
  try {
    return readFileSync('/proc/self/cgroup', 'utf8');
  } catch {
    return '';
  }
}

/** The lines of /proc/self/cgroup as `[controllers, path]`. */
function memberships(text: string): [string[], string][] {
  const out: [string[], string][] = [];
  for (const line of text.split('\n')) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (m) out.push([(m[1] as string).split(',').filter(Boolean), m[2] as string]);
  }
  return out;
}

/** `join(...parts)` without a trailing slash (the root cgroup's path is `/`). */
function under(...parts: string[]): string {
  return join(...parts).replace(/(.)\/+$/, '$1');
}

/** Why no group can be made under `dir`, or undefined when one can (a probe, made and removed at once). */
function canMakeChild(dir: string, pid: number, files: CgroupFiles): string | undefined {
  const probe = join(dir, `sluice-${pid}-${threadId}-probe`);
  try {
    files.mkdir(probe);
  } catch (err) {
    return `cannot create a group under ${dir} (${(err as NodeJS.ErrnoException).code ?? String(err)})`;
  }
  try {
    files.rmdir(probe);
  } catch {
    // Left for reapStaleGroups.
  }
  return undefined;
}

function detectV1(
  root: string,
  lines: [string[], string][],
  pid: number,
  files: CgroupFiles,
): { memory?: string; pids?: string; reasons: string[]; found: boolean } {
  const reasons: string[] = [];
  const out: { memory?: string; pids?: string } = {};
  let found = false;
  for (const [controller, key] of [
    ['memory', 'memory'],
    ['pids', 'pids'],
  ] as const) {
    const line = lines.find(([c]) => c.includes(controller));
    if (!line) continue;
    const dir = [under(root, controller, line[1]), under(root, line[0].join(','), line[1])].find((d) =>
      files.exists(d),
    );
    if (!dir) continue;
    found = true;
    const why = canMakeChild(dir, pid, files);
    if (why) reasons.push(`${controller}: ${why}`);
    else out[key] = dir;
  }
  return { ...out, reasons, found };
}

function detectV2(root: string, lines: [string[], string][], pid: number, files: CgroupFiles): CgroupDetection {
  const line = lines.find(([c, p]) => c.length === 0 && p.startsWith('/'));
  if (!line) return { kind: 'v2', reasons: ['no unified-hierarchy line (0::/path) in /proc/self/cgroup'] };
  const dir = under(root, line[1]);
  let enabled: string[] = [];
  try {
    enabled = files.read(join(dir, 'cgroup.subtree_control')).split(/\s+/).filter(Boolean);
  } catch (err) {
    return { kind: 'v2', reasons: [`cannot read ${join(dir, 'cgroup.subtree_control')} (${String(err)})`] };
  }
  const reasons: string[] = [];
  const wanted = ['memory', 'pids'].filter((c) => {
    if (enabled.includes(c)) return true;
    reasons.push(`${c}: not enabled in ${join(dir, 'cgroup.subtree_control')} (sluice never enables it)`);
    return false;
  });
  if (wanted.length === 0) return { kind: 'v2', reasons };
  const why = canMakeChild(dir, pid, files);
  if (why) return { kind: 'v2', reasons: [...reasons, why] };
  return {
    kind: 'v2',
    ...(wanted.includes('memory') ? { memory: dir } : {}),
    ...(wanted.includes('pids') ? { pids: dir } : {}),
    reasons,
  };
}

const detected = new Map<string, CgroupDetection>();

/**
 * Where this process may make limit groups: v2 when the root holds
 * `cgroup.controllers`, else v1's memory and pids hierarchies. Probes by
 * making and removing a group; cached per root.
 */
export function detectCgroup(opts: CgroupOptions = {}): CgroupDetection {
  const o = optionsOf(opts);
  const text = selfCgroup(opts);
  const key = `${o.root}\0${text}`;
  const cached = o.files === CGROUP_FILES ? detected.get(key) : undefined;
  if (cached) return cached;
  const lines = memberships(text);
  let result: CgroupDetection;
  if (o.files.exists(join(o.root, 'cgroup.controllers'))) {
    result = detectV2(o.root, lines, o.pid, o.files);
  } else {
    const v1 = detectV1(o.root, lines, o.pid, o.files);
    result = v1.found
      ? {
          kind: 'v1',
          ...(v1.memory ? { memory: v1.memory } : {}),
          ...(v1.pids ? { pids: v1.pids } : {}),
          reasons: v1.reasons,
        }
      : { kind: 'none', reasons: [`no memory or pids cgroup of this process under ${o.root}`] };
  }
  if (o.files === CGROUP_FILES) detected.set(key, result);
  return result;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes the empty groups of engines no longer running, under every
 * directory {@link detectCgroup} found; returns those removed. rmdir refuses
 * a group with processes, which are not ours to judge.
 */
export function reapStaleGroups(opts: CgroupOptions = {}): string[] {
  const o = optionsOf(opts);
  const found = detectCgroup(opts);
  const removed: string[] = [];
  for (const parent of new Set([found.memory, found.pids].filter((d): d is string => d !== undefined))) {
    let names: string[];
    try {
      names = o.files.readdir(parent);
    } catch {
      continue;
    }
    for (const name of names) {
      const m = GROUP_NAME.exec(name);
      if (!m) continue;
      const owner = Number(m[1]);
      if (owner === o.pid || alive(owner)) continue;
      try {
        o.files.rmdir(join(parent, name));
        removed.push(join(parent, name));
      } catch {
        // Populated, or removed by another engine meanwhile.
      }
    }
  }
  return removed;
}

/** The number after `key` in a flat-keyed counter file (`oom_kill 1`, `max 3`), 0 when absent. */
function counter(files: CgroupFiles, path: string, key: string): number {
  try {
    const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(files.read(path));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** Writes a control file that may not exist on this kernel (swap accounting, oom.group). */
function writeIfPresent(files: CgroupFiles, path: string, text: string): void {
  if (files.exists(path)) files.write(path, text);
}

function pidsIn(files: CgroupFiles, dir: string): number[] {
  try {
    return files
      .read(join(dir, 'cgroup.procs'))
      .split('\n')
      .filter(Boolean)
      .map(Number)
      .filter((n) => Number.isInteger(n) && n > 0);
  } catch {
    return [];
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A new group holding `limits`' memory and processes limits as far as the
 * cgroups allow (see {@link LimitGroup.holds}); undefined when it holds
 * none. A process's first call also runs {@link reapStaleGroups}.
 */
export function openLimitGroup(limits: SandboxLimits | undefined, opts: CgroupOptions = {}): LimitGroup | undefined {
  const wantMemory = limits?.memoryBytes !== undefined;
  const wantProcesses = limits?.processes !== undefined;
  if (!wantMemory && !wantProcesses) return undefined;
  const o = optionsOf(opts);
  const found = detectCgroup(opts);
  if (found.kind === 'none') return undefined;
  const reapKey = `${o.root}\0${o.pid}`;
  if (!reaped.has(reapKey)) {
    reaped.add(reapKey);
    reapStaleGroups(opts);
  }
  // The thread's id too: every worker thread of the engine counts from 1 in its own copy of this module.
  const name = `sluice-${o.pid}-${threadId}-${++serial}`;
  const dirs = new Map<string, CgroupLimit[]>();
  const made: string[] = [];
  const holds: CgroupLimit[] = [];
  const make = (parent: string, limit: CgroupLimit, configure: (dir: string) => void) => {
    const dir = join(parent, name);
    const fresh = !dirs.has(dir);
    try {
      if (fresh) {
        o.files.mkdir(dir);
        made.push(dir);
        dirs.set(dir, []);
      }
      configure(dir);
      dirs.get(dir)?.push(limit);
      holds.push(limit);
    } catch {
      // This controller cannot be set here; the caller falls back to its RLIMIT.
      if (fresh && made.at(-1) === dir) {
        try {
          o.files.rmdir(dir);
          made.pop();
          dirs.delete(dir);
        } catch {
          // Left for close().
        }
      }
    }
  };
  if (wantMemory && found.memory) {
    const bytes = String(limits?.memoryBytes);
    make(found.memory, 'memory', (dir) => {
      if (found.kind === 'v1') {
        o.files.write(join(dir, 'memory.limit_in_bytes'), bytes);
        // memsw counts memory and swap together: at the same value, swapping out does not dodge the limit.
        writeIfPresent(o.files, join(dir, 'memory.memsw.limit_in_bytes'), bytes);
      } else {
        o.files.write(join(dir, 'memory.max'), bytes);
        writeIfPresent(o.files, join(dir, 'memory.swap.max'), '0');
        // An OOM kill takes the whole sandbox, not one process of it that the others outlive.
        writeIfPresent(o.files, join(dir, 'memory.oom.group'), '1');
      }
    });
  }
  if (wantProcesses && found.pids) {
    const max = String((limits?.processes ?? 0) + BWRAP_PROCESSES);
    make(found.pids, 'processes', (dir) => o.files.write(join(dir, 'pids.max'), max));
  }
  if (holds.length === 0) {
    for (const dir of made.reverse()) {
      try {
        o.files.rmdir(dir);
      } catch {
        // An empty group of ours: the next engine's reapStaleGroups removes it.
      }
    }
    return undefined;
  }
  const kind = found.kind;
  const all = [...dirs.keys()];
  const dirOf = (limit: CgroupLimit) => all.find((d) => dirs.get(d)?.includes(limit));
  let closing: Promise<void> | undefined;
  return {
    kind,
    holds,
    dirs: all,
    wrap(cmd) {
      const joins = all.map((_, i) => `echo $$ > "$${i + 1}/cgroup.procs"`).join(' && ');
      return {
        file: '/bin/sh',
        args: ['-c', `${joins} && shift ${all.length} && exec "$@"`, 'sh', ...all, cmd.file, ...cmd.args],
      };
    },
    exceeded() {
      const memoryDir = dirOf('memory');
      if (memoryDir && limits?.memoryBytes !== undefined) {
        const file = kind === 'v1' ? 'memory.oom_control' : 'memory.events';
        if (counter(o.files, join(memoryDir, file), 'oom_kill') > 0) {
          return { limit: 'memory', value: limits.memoryBytes };
        }
      }
      const pidsDir = dirOf('processes');
      if (pidsDir && limits?.processes !== undefined && counter(o.files, join(pidsDir, 'pids.events'), 'max') > 0) {
        return { limit: 'processes', value: limits.processes };
      }
      return undefined;
    },
    close() {
      closing ??= removeGroups(o.files, all);
      return closing;
    },
  };
}

/** Kills what is left in `dirs` and removes them, retrying while dying processes still populate them. */
async function removeGroups(files: CgroupFiles, dirs: readonly string[]): Promise<void> {
  const deadline = Date.now() + 5000;
  let left = [...dirs];
  for (;;) {
    const next: string[] = [];
    for (const dir of left) {
      if (!files.exists(dir)) continue;
      // cgroup.kill (v2) also reaches processes forked while the list below is read.
      try {
        writeIfPresent(files, join(dir, 'cgroup.kill'), '1');
      } catch {
        // Kill one by one below.
      }
      for (const pid of pidsIn(files, dir)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
      try {
        files.rmdir(dir);
      } catch {
        next.push(dir);
      }
    }
    left = next;
    if (left.length === 0 || Date.now() > deadline) return;
    await sleep(10);
  }
}
