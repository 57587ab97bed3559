/**
 * The cgroup side of sandbox limits: detection, the v2 file protocol against
 * a directory tree that behaves like a cgroup v2 filesystem (this suite may
 * run where there is none), and on a writable cgroup v1 (as root) the real
 * thing: stale groups of dead engines removed.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { onPath } from '../../workers/sandbox/bwrap.js';
import {
  CGROUP_FILES,
  type CgroupFiles,
  type CgroupOptions,
  detectCgroup,
  openLimitGroup,
  reapStaleGroups,
} from '../../workers/sandbox/cgroup.js';
import { prepareSandboxed } from '../../workers/sandbox/prepare.js';
import { limitsPolicy } from './policy.js';
import { runsIf } from './skipped.js';

/** The pids listed in a group's cgroup.procs that are still running. */
function livePids(dir: string): number[] {
  const listed = readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
  return listed.filter((pid) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  });
}

/**
 * A cgroup v2 filesystem over a plain directory: a new group gets the
 * interface files of the controllers its parent's subtree_control enables,
 * rmdir refuses a group with live processes and removes the files with it,
 * and cgroup.kill kills what cgroup.procs lists.
 */
const fakeV2: CgroupFiles = {
  ...CGROUP_FILES,
  mkdir(path) {
    const enabled = readFileSync(join(dirname(path), 'cgroup.subtree_control'), 'utf8');
    mkdirSync(path);
    const files = ['cgroup.procs', 'cgroup.kill', 'cgroup.subtree_control'];
    if (enabled.includes('memory')) files.push('memory.max', 'memory.swap.max', 'memory.oom.group', 'memory.events');
    if (enabled.includes('pids')) files.push('pids.max', 'pids.events');
    for (const f of files) writeFileSync(join(path, f), '');
  },
  rmdir(path) {
    if (livePids(path).length > 0) throw Object.assign(new Error(`EBUSY: ${path}`), { code: 'EBUSY' });
    rmSync(path, { recursive: true });
  },
  write(path, text) {
    CGROUP_FILES.write(path, text);
    if (basename(path) === 'cgroup.kill') for (const pid of livePids(dirname(path))) process.kill(pid, 'SIGKILL');
  },
};

let root: string;
const PARENT = 'user.slice/sluice.service';
const parent = () => join(root, PARENT);

/** A fake unified hierarchy whose engine sits in PARENT, with `enabled` in its subtree_control. */
function v2Tree(enabled: string): CgroupOptions {
  writeFileSync(join(root, 'cgroup.controllers'), 'cpuset cpu io memory hugetlb pids rdma misc\n');
  mkdirSync(parent(), { recursive: true });
  writeFileSync(join(parent(), 'cgroup.subtree_control'), enabled);
  writeFileSync(join(parent(), 'cgroup.procs'), `${process.pid}\n`);
  return { root, self: `0::/${PARENT}\n`, files: fakeV2 };
}

const ours = () => readdirSync(parent()).filter((n) => n.startsWith('sluice-'));

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'sluice-cgroup-'));
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('cgroup v2 (a fake unified hierarchy)', () => {
  it('makes one group for memory and processes, with the limits, no swap and whole-group OOM kills', () => {
    const opts = v2Tree('memory pids\n');
    expect(detectCgroup(opts)).toEqual({ kind: 'v2', memory: parent(), pids: parent(), reasons: [] });
    const group = openLimitGroup({ memoryBytes: 256 << 20, processes: 64, cpuSeconds: 1 }, opts);
    expect(group).toBeDefined();
    if (!group) return;
    expect(group.kind).toBe('v2');
    expect(group.holds).toEqual(['memory', 'processes']);
    expect(group.dirs).toHaveLength(1);
    const dir = group.dirs[0] as string;
    expect(basename(dir)).toMatch(new RegExp(`^sluice-${process.pid}-\\d+-\\d+$`));
    const read = (f: string) => readFileSync(join(dir, f), 'utf8');
    expect(read('memory.max')).toBe(String(256 << 20));
    expect(read('memory.swap.max')).toBe('0');
    expect(read('memory.oom.group')).toBe('1');
    // One more than asked: bwrap's outer process is in the group but outside the sandbox's PID namespace.
    expect(read('pids.max')).toBe('65');
    expect(group.wrap({ file: '/usr/bin/bwrap', args: ['--', 'true'] })).toEqual({
      file: '/bin/sh',
      args: ['-c', 'echo $$ > "$1/cgroup.procs" && shift 1 && exec "$@"', 'sh', dir, '/usr/bin/bwrap', '--', 'true'],
    });
    return group.close();
  });

  it('reads the memory verdict from oom_kill and the processes verdict from pids.events, memory first', async () => {
    const group = openLimitGroup({ memoryBytes: 1 << 30, processes: 10 }, v2Tree('memory pids'));
    if (!group) throw new Error('no group');
    const dir = group.dirs[0] as string;
    expect(group.exceeded()).toBeUndefined();
    // memory.max alone is reclaim, not a kill.
    writeFileSync(join(dir, 'memory.events'), 'low 0\nhigh 0\nmax 12\noom 0\noom_kill 0\noom_group_kill 0\n');
    expect(group.exceeded()).toBeUndefined();
    writeFileSync(join(dir, 'pids.events'), 'max 3\n');
    expect(group.exceeded()).toEqual({ limit: 'processes', value: 10 });
    writeFileSync(join(dir, 'memory.events'), 'low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 1\n');
    expect(group.exceeded()).toEqual({ limit: 'memory', value: 1 << 30 });
    await group.close();
    expect(ours()).toEqual([]);
  });

  it('holds only the controllers subtree_control enables, and says why not the others', async () => {
    const opts = v2Tree('cpu pids\n');
    const found = detectCgroup(opts);
    expect(found).toMatchObject({ kind: 'v2', pids: parent() });
    expect(found.memory).toBeUndefined();
    expect(found.reasons).toEqual([expect.stringContaining('memory: not enabled in')]);
    const group = openLimitGroup({ memoryBytes: 1 << 30, processes: 10 }, opts);
    expect(group?.holds).toEqual(['processes']);
    expect(existsSync(join(group?.dirs[0] as string, 'memory.max'))).toBe(false);
    await group?.close();
  });

  it('makes no group when subtree_control enables neither, never enabling one itself', () => {
    const opts = v2Tree('');
    const found = detectCgroup(opts);
    expect(found).toEqual({
      kind: 'v2',
      reasons: [expect.stringContaining('memory:'), expect.stringContaining('pids:')],
    });
    expect(openLimitGroup({ memoryBytes: 1 << 30, processes: 10 }, opts)).toBeUndefined();
    expect(readFileSync(join(parent(), 'cgroup.subtree_control'), 'utf8')).toBe('');
    expect(ours()).toEqual([]);
  });

  it('makes no group where mkdir is refused, or for limits no cgroup holds', () => {
    const opts = v2Tree('memory pids');
    const refused: CgroupFiles = {
      ...fakeV2,
      mkdir: () => {
        throw Object.assign(new Error('EACCES'), { code: 'EACCES' });
      },
    };
    const found = detectCgroup({ ...opts, files: refused });
    expect(found.memory).toBeUndefined();
    expect(found.reasons).toEqual([expect.stringContaining('(EACCES)')]);
    expect(openLimitGroup({ memoryBytes: 1 << 30 }, { ...opts, files: refused })).toBeUndefined();
    expect(openLimitGroup({ cpuSeconds: 1, fileSizeBytes: 1 << 20 }, opts)).toBeUndefined();
    expect(openLimitGroup(undefined, opts)).toBeUndefined();
    expect(ours()).toEqual([]);
  });

  it('close() SIGKILLs what is left in the group, removes it, and is idempotent', async () => {
    const group = openLimitGroup({ processes: 10 }, v2Tree('pids'));
    if (!group) throw new Error('no group');
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, s) => r(s)));
    writeFileSync(join(group.dirs[0] as string, 'cgroup.procs'), `${child.pid}\n`);
    await Promise.all([group.close(), group.close()]);
    expect(await exited).toBe('SIGKILL');
    expect(ours()).toEqual([]);
    await expect(group.close()).resolves.toBeUndefined();
  });

  it('removes the empty groups of dead engines, not those of live ones or with processes', async () => {
    const opts = v2Tree('memory pids');
    const dead = spawnSync('true').pid;
    const dirs = [
      `sluice-${dead}-1-3`,
      `sluice-${dead}-1-4`,
      `sluice-${process.ppid}-1-1`,
      `sluice-${process.pid}-1-1000`,
      'sluice-other',
    ];
    for (const d of dirs) fakeV2.mkdir(join(parent(), d));
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      writeFileSync(join(parent(), `sluice-${dead}-1-4`, 'cgroup.procs'), `${child.pid}\n`);
      expect(reapStaleGroups(opts)).toEqual([join(parent(), `sluice-${dead}-1-3`)]);
      expect(ours().sort()).toEqual(dirs.slice(1).sort());
    } finally {
      child.kill('SIGKILL');
      await new Promise((r) => child.on('exit', r));
    }
  });
});

describe('detection', () => {
  it('takes a hybrid layout (v1 controllers, an empty unified tree) as v1', () => {
    mkdirSync(join(root, 'unified'));
    writeFileSync(join(root, 'unified', 'cgroup.controllers'), '');
    mkdirSync(join(root, 'memory', 'engine'), { recursive: true });
    mkdirSync(join(root, 'pids'));
    const found = detectCgroup({ root, self: '8:pids:/\n4:memory:/engine\n0::/\n', files: CGROUP_FILES });
    expect(found).toEqual({
      kind: 'v1',
      memory: join(root, 'memory', 'engine'),
      pids: join(root, 'pids'),
      reasons: [],
    });
    expect(readdirSync(join(root, 'memory', 'engine'))).toEqual([]);
  });

  it('finds no cgroup where neither hierarchy exists', () => {
    expect(detectCgroup({ root, self: '0::/\n', files: CGROUP_FILES })).toMatchObject({ kind: 'none' });
  });
});

const real = detectCgroup();
describe.runIf(
  runsIf(
    real.kind === 'v1' && real.memory !== undefined,
    'the writable cgroup v1 test',
    `kind ${real.kind}${real.reasons.length > 0 ? `; ${real.reasons.join('; ')}` : ''}`,
  ),
)('cgroup v1 of this process (writable)', () => {
  it('removes an empty group a killed engine left', () => {
    const dead = spawnSync('true').pid;
    const stale = join(real.memory as string, `sluice-${dead}-0-1`);
    mkdirSync(stale);
    expect(reapStaleGroups()).toContain(stale);
    expect(existsSync(stale)).toBe(false);
  });
});

describe.runIf(onPath('bwrap') !== undefined)('prepareSandboxed with a cgroup', () => {
  const policy = (workspace: string) =>
    limitsPolicy(workspace, { memoryBytes: 256 << 20, processes: 64, openFiles: 64 });

  it('joins the group before bwrap and leaves memory and processes out of the RLIMITs, also for root', async () => {
    const p = prepareSandboxed(policy(root), 'true', [], root, process.env, { uid: 0, cgroup: v2Tree('memory pids') });
    expect(p.file).toBe('/bin/sh');
    expect(p.args.slice(3, 5)).toEqual([...p.cgroups, onPath('bwrap')]);
    expect(p.args.filter((a) => a.startsWith('--'))).toContain('--nofile=64:64');
    expect(p.args.some((a) => a.startsWith('--as=') || a.startsWith('--nproc='))).toBe(false);
    await p.release();
    expect(ours()).toEqual([]);
  });

  it('refuses a processes limit for root without a pids cgroup (EUNSUPPORTED), leaving no group', () => {
    const cgroup = v2Tree('memory');
    expect(() => prepareSandboxed(policy(root), 'true', [], root, process.env, { uid: 0, cgroup })).toThrow(
      expect.objectContaining({ code: 'EUNSUPPORTED', details: { missing: 'processes-limit' } }),
    );
    expect(ours()).toEqual([]);
  });
});
