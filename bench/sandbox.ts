/**
 * The sandbox's cost (issue 39), with the policy a user gets from
 * `Engine.open({ sandbox: {} })` (workspace-write, no network, the default
 * hidden paths and environment, no limits):
 *
 * - small: 200 small bash calls (`echo $i`), 16 in flight, on a warm engine,
 *   sandboxed against the same bwrap command line spawned straight from this
 *   process (`prepareSandboxed` builds it from the policy the engine's call
 *   recorded, so both sides run the identical argv; stdout and stderr read,
 *   the verdict taken and the group released as the bash tool does): wall
 *   <= 1.3x. The same calls unsandboxed through the engine are printed
 *   beside it. Rounds alternate; medians are quoted. The raw side runs in
 *   a node process of its own ({@link rawRound}); the engine spawns through
 *   its spawn helper (posix_spawn), so it may come in below 1x.
 * - sleeps: 200 concurrent sandboxed `sleep 2` calls, the engine's
 *   concurrency letting all run at once: all succeed within 4 s (2x the
 *   sleep). Beside it, the same sleeps started raw at once by a `sh` loop
 *   (a spawner cheaper than any Node process), with and without bwrap, in
 *   a cpuacct cgroup of their own where one can be made (root, cgroup
 *   v1): their wall and the CPU each spawn took, every process of it
 *   counted. Spawning is CPU-bound, so no runner finishes before
 *   `floorMs`, the raw bwrap spawns' CPU spread over every core plus the
 *   sleep; where that floor is above 4 s, bwrap and the kernel miss the
 *   target on this machine, whatever the engine does.
 *
 * Without a working bwrap it prints why and keeps no result.
 *
 *   SLUICE_BENCH_SANDBOX_ROUNDS (default 3), SLUICE_BENCH_SANDBOX_WARMUP
 *   (default 1000, rounded up to whole rounds of 200), SLUICE_BENCH_SLEEPS
 *   (default 200)
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine } from '../engine/engine.js';
import type { SandboxPolicy } from '../engine/protocol/sandbox.js';
import { prepareSandboxed } from '../workers/sandbox/prepare.js';
import { sandboxSupport } from '../workers/sandbox/support.js';
import { check, passes, reportParts, target } from './targets.js';
import { envInt, inFlight, median, report, tempDir } from './util.js';

const CALLS = 200;
const IN_FLIGHT = 16;
const ROUNDS = envInt('SLUICE_BENCH_SANDBOX_ROUNDS', 3);
const WARMUP_ROUNDS = Math.max(1, Math.ceil(envInt('SLUICE_BENCH_SANDBOX_WARMUP', 1000) / CALLS));
const SLEEPS = envInt('SLUICE_BENCH_SLEEPS', 200);
const SLEEP_S = 2;

const r2 = (x: number) => Math.round(x * 100) / 100;

/** What the bash tool does with a sandboxed call, without the engine: build, spawn, read both pipes, verdict, release. */
function rawCall(policy: SandboxPolicy, cwd: string, command: string): Promise<void> {
  const cmd = prepareSandboxed(policy, 'bash', ['-c', command], cwd);
  return new Promise<void>((resolve, reject) => {
    const child = spawn(cmd.file, cmd.args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', () => {});
    child.stderr.on('data', () => {});
    child.on('error', reject);
    child.on('close', (code, signal) => {
      cmd.verdict({ code, signal });
      cmd.release().then(() => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))), reject);
    });
  });
}

/**
 * One round of raw calls from a node process of its own, which holds no
 * engine: Node's spawn forks the calling process, so from this one (two
 * engines and their threads) every raw spawn would copy their page tables,
 * a cost the engine's spawn helper never pays.
 */
function rawRound(policyFile: string, dir: string, round: number): number {
  const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), 'raw', policyFile, dir, String(round)], {
    encoding: 'utf8',
  });
  return Number(out.trim());
}

/** What a raw `sh` loop of spawns measured; `cpuMs` is null where no cpuacct group could be made. */
interface LoopRound {
  wallMs: number;
  cpuMs: number | null;
}

const CPUACCT = '/sys/fs/cgroup/cpuacct';

/**
 * `file args` started `count` times at once by `/bin/sh` (one fork each,
 * then exec), waited for all; inside a cpuacct group when one can be made,
 * so the CPU of every process (bwrap, its namespaces' setup and teardown
 * in the exiting processes, bash, the sleep) is counted, not only what
 * /proc's tick-sampled times of reaped children would show.
 */
function loopRound(file: string, args: readonly string[], count: number, cwd: string): LoopRound {
  let group: string | undefined = join(CPUACCT, `sluice-bench-${process.pid}-${Date.now()}`);
  try {
    mkdirSync(group);
  } catch {
    group = undefined;
  }
  const join_ = group ? `echo $$ > "${group}/cgroup.procs" || exit 1; ` : '';
  const script = `${join_}n=$1; shift; i=0; while [ "$i" -lt "$n" ]; do "$@" >/dev/null 2>&1 & i=$((i+1)); done; wait`;
  try {
    const t0 = performance.now();
    execFileSync('/bin/sh', ['-c', script, 'sh', String(count), file, ...args], { cwd, stdio: 'ignore' });
    const wallMs = performance.now() - t0;
    const cpuMs = group ? Number(readFileSync(join(group, 'cpuacct.usage'), 'utf8')) / 1e6 : null;
    return { wallMs, cpuMs };
  } finally {
    if (group) removeGroup(group);
  }
}

/**
 * Removes a cpuacct group once the kernel has let go of it: the last of its
 * processes can still be exiting after the shell's `wait` returned (rmdir is
 * EBUSY meanwhile), so the removal is retried for a bounded time.
 */
function removeGroup(group: string): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let attempt = 0; ; attempt++) {
    try {
      rmdirSync(group);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EBUSY' || attempt >= 200) throw err;
      Atomics.wait(pause, 0, 0, 50);
    }
  }
}

async function engineRound(engine: Engine, round: number): Promise<number> {
  return inFlight(CALLS, IN_FLIGHT, async (i) => {
    const r = await engine.run('bash', { command: `echo ${i}` }, { session: `s${round}-${i % 10}` });
    if (r.status !== 'success') throw new Error(r.model);
  });
}

async function small(dir: string) {
  const sandboxed = await Engine.open({ store: join(dir, 'store-sbx'), cwd: dir, sandbox: {} });
  const plain = await Engine.open({ store: join(dir, 'store-plain'), cwd: dir });
  try {
    const first = await sandboxed.run('bash', { command: 'true' });
    const policy = first.sandbox;
    if (!policy) throw new Error('a sandboxed engine ran a call unconfined');
    const policyFile = join(dir, 'policy.json');
    writeFileSync(policyFile, JSON.stringify(policy));
    const raw = (round: number) => rawRound(policyFile, dir, round);
    for (let w = 1; w <= WARMUP_ROUNDS; w++) {
      await engineRound(sandboxed, -w);
      await engineRound(plain, -w);
      await raw(-w);
    }
    const rows: Array<{ sandboxedMs: number; unsandboxedMs: number; rawBwrapMs: number }> = [];
    for (let round = 0; round < ROUNDS; round++) {
      const rawBwrapMs = await raw(round);
      const sandboxedMs = await engineRound(sandboxed, round);
      const unsandboxedMs = await engineRound(plain, round);
      rows.push({ sandboxedMs, unsandboxedMs, rawBwrapMs });
    }
    const wall = median(rows.map((r) => r.sandboxedMs / r.rawBwrapMs));
    const targets = [
      target(
        'sandbox.small-wall',
        '200 small sandboxed bash calls, 16 in flight, warm engine, default policy: wall ≤ 1.3× the same bwrap spawns',
        wall,
        '<=',
        1.3,
        'x',
        2,
      ),
    ];
    return {
      warmupCalls: WARMUP_ROUNDS * CALLS,
      wallRatio: r2(wall),
      sandboxedToUnsandboxed: r2(median(rows.map((r) => r.sandboxedMs / r.unsandboxedMs))),
      rounds: rows.map((r) => ({
        sandboxedMs: Math.round(r.sandboxedMs),
        unsandboxedMs: Math.round(r.unsandboxedMs),
        rawBwrapMs: Math.round(r.rawBwrapMs),
      })),
      pass: passes(targets),
      targets,
    };
  } finally {
    await sandboxed.close();
    await plain.close();
  }
}

async function sleeps(dir: string) {
  const engine = await Engine.open({
    store: join(dir, 'store-sleeps'),
    cwd: dir,
    sandbox: {},
    // Only the width asked for: the threads carry it at their defaults, as they do for a user.
    concurrency: Math.min(Math.max(SLEEPS, 200), 1024),
  });
  try {
    // Threads up and the helper started: the figure is the sleeps, not the engine's start.
    await engine.run('bash', { command: 'true' });
    const t0 = performance.now();
    const results = await Promise.all(
      Array.from({ length: SLEEPS }, () => engine.run('bash', { command: `sleep ${SLEEP_S}` })),
    );
    const wallMs = performance.now() - t0;
    const failed = results.filter((r) => r.status !== 'success' || !r.sandbox).length;
    // For comparison: the same sleeps spawned raw at once, to tell the engine from the machine's bwrap start-ups.
    const policy = results[0]?.sandbox;
    if (!policy) throw new Error('a sandboxed engine ran a call unconfined');
    const cmd = prepareSandboxed(policy, 'bash', ['-c', `sleep ${SLEEP_S}`], dir);
    const raw = loopRound(cmd.file, cmd.args, SLEEPS, dir);
    await cmd.release();
    const bash = loopRound('bash', ['-c', `sleep ${SLEEP_S}`], SLEEPS, dir);
    const cores = availableParallelism();
    const perSpawn = (r: LoopRound) => (r.cpuMs === null ? null : r2(r.cpuMs / SLEEPS));
    // The least wall any runner of these sleeps can have: its spawns' CPU on every core at once, then the sleep.
    const floorMs = raw.cpuMs === null ? null : raw.cpuMs / cores + SLEEP_S * 1000;
    const targets = [
      target(
        'sandbox.sleeps-wall',
        `${SLEEPS} concurrent sandboxed \`sleep ${SLEEP_S}\` calls: all done ≤ 2× the sleep`,
        wallMs / (SLEEP_S * 1000),
        '<=',
        2,
        'x',
        2,
      ),
      check(
        'sandbox.sleeps-failed',
        `${SLEEPS} concurrent sandboxed sleeps: every call succeeds, sandboxed`,
        failed === 0,
      ),
    ];
    return {
      calls: SLEEPS,
      wallMs: Math.round(wallMs),
      rawBwrapMs: Math.round(raw.wallMs),
      wallRatioToRaw: r2(wallMs / raw.wallMs),
      rawBwrapCpuMsPerSpawn: perSpawn(raw),
      rawBashMs: Math.round(bash.wallMs),
      rawBashCpuMsPerSpawn: perSpawn(bash),
      cores,
      floorMs: floorMs === null ? null : Math.round(floorMs),
      floorRatioToSleep: floorMs === null ? null : r2(floorMs / (SLEEP_S * 1000)),
      failed,
      threads: engine.threads,
      pass: passes(targets),
      targets,
    };
  } finally {
    await engine.close();
  }
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === 'raw') {
  const [policyFile, dir, round] = rest as [string, string, string];
  const policy = JSON.parse(readFileSync(policyFile, 'utf8')) as SandboxPolicy;
  const t0 = performance.now();
  await inFlight(CALLS, IN_FLIGHT, (i) => rawCall(policy, dir, `echo ${Number(round) * CALLS + i}`));
  process.stdout.write(`${performance.now() - t0}\n`);
} else if (!sandboxSupport().available) {
  const why = sandboxSupport().bwrap.error ?? 'bwrap cannot build a sandbox here';
  report({
    bench: 'sandbox',
    skipped: `sandbox benchmarks did not run: ${why}`,
    targets: [],
    pass: true,
  });
} else {
  const tmp = tempDir('sluice-bench-sandbox-');
  try {
    const which = new Set(mode ? mode.split(',') : ['small', 'sleeps']);
    await reportParts('sandbox', which, { small: () => small(tmp.dir), sleeps: () => sleeps(tmp.dir) });
  } finally {
    tmp.remove();
  }
}
