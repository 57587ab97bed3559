/**
 * The spawn helper (workers/spawn-helper.ts): bash starts as a child of a
 * small per-thread process instead of the engine's, its pipes come back to
 * the worker, and nothing changes for the call: the same bytes, the same
 * codes, no process left behind however the engine or the helper ends.
 *
 * Most tests set `SLUICE_SPAWN_HELPER=wait` (inherited by the worker
 * threads and by host processes), so every spawn goes through the helper;
 * by default the first ones start directly while it comes up. Every test
 * runs against both helpers: the Python one (posix_spawn,
 * workers/spawn-helper.py), chosen by default where a system Python is,
 * and the Node one (`SLUICE_SPAWN_PYTHON=` empty).
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, promises as fsp, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Engine } from '../../engine/engine.js';
import { closeSpawnHelper, isSpawnHelperOf, spawnPiped } from '../../workers/spawner.js';
import {
  closeEngines,
  openEngine,
  streamBytes,
  uniqueSleep,
  waitForDisplay,
  waitNoProcess,
  waitProcess,
} from '../support/engines.js';
import { eventually, running, startHost, stopHosts } from '../support/lifecycle-host.js';

/** The current values of environment variables `names`, to put back with {@link restoreEnv}. */
function saveEnv(...names: string[]): Record<string, string | undefined> {
  return Object.fromEntries(names.map((n) => [n, process.env[n]]));
}

function restoreEnv(saved: Record<string, string | undefined>): void {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
}

const saved = saveEnv('SLUICE_SPAWN_HELPER', 'SLUICE_SPAWN_PYTHON');
const PYTHON = '/usr/bin/python3';

afterEach(async () => {
  await stopHosts();
  await closeEngines();
  restoreEnv(saved);
});

/** The command line of process `pid` (empty when it is gone). */
function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' ').trim();
  } catch {
    return '';
  }
}

/** Fields of /proc/<pid>/stat after the command name: state, ppid, pgrp, ... */
function stat(pid: number): string[] {
  const text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

function parentPid(pid: number): number {
  return Number(stat(pid)[1]);
}

function groupOf(pid: number): number {
  return Number(stat(pid)[2]);
}

/** Runs `echo $PPID` through bash: the pid of the process that started it. */
async function parentOfBash(engine: Engine): Promise<number> {
  const r = await engine.run('bash', { command: 'echo $PPID' });
  expect(r.status).toBe('success');
  return Number((await streamBytes(engine, r)).stdout);
}

const kinds = [
  { kind: 'python', python: PYTHON },
  { kind: 'node', python: '' },
] as const;

describe.each(kinds)('the $kind spawn helper', ({ kind, python }) => {
  beforeEach(() => {
    process.env.SLUICE_SPAWN_HELPER = 'wait';
    process.env.SLUICE_SPAWN_PYTHON = python;
  });

  /** True when `pid` is a helper of `owner` of this kind. */
  function isHelper(pid: number, owner = process.pid): boolean {
    const line = cmdline(pid);
    return isSpawnHelperOf(line, owner) && line.includes('spawn-helper.py') === (kind === 'python');
  }

  it('starts bash as its child, and stdout and stderr arrive byte for byte', async () => {
    expect(kind === 'node' || existsSync(PYTHON)).toBe(true);
    const { engine, dir } = await openEngine();
    const helper = await parentOfBash(engine);
    expect(helper).not.toBe(process.pid);
    expect(isHelper(helper)).toBe(true);
    // 3 MB of random bytes (no valid UTF-8 to lean on) on both streams.
    const file = join(dir, 'random.bin');
    const bytes = randomBytes(3_000_000);
    await fsp.writeFile(file, bytes);
    const r = await engine.run('bash', { command: `cat ${file}; cat ${file} >&2; echo $PPID >&2` });
    expect(r.status).toBe('success');
    const digest = createHash('sha256').update(bytes).digest('hex');
    const streams = r.output?.kind === 'streams' ? r.output.streams : [];
    const byName = Object.fromEntries(streams.map((s) => [s.name, s]));
    expect(byName.stdout).toMatchObject({ digest, bytes: 3_000_000 });
    expect(byName.stderr?.bytes).toBe(3_000_000 + `${helper}\n`.length);
  });

  it('loses no byte a process writes the instant it starts, with 48 calls starting at once', async () => {
    const { engine } = await openEngine();
    const results = await Promise.all(
      Array.from({ length: 48 }, (_, i) => engine.run('bash', { command: `printf 'out-${i}'; printf 'err-${i}' >&2` })),
    );
    for (const [i, r] of results.entries()) {
      expect(r.status).toBe('success');
      expect(await streamBytes(engine, r)).toEqual({ stdout: `out-${i}`, stderr: `err-${i}` });
    }
  });

  it('starts tools as Node would: every signal at its default (SIGPIPE too), none blocked, the environment exactly', async () => {
    const savedLocale = saveEnv('LC_CTYPE', 'LC_ALL', 'LANG');
    // A C locale: Python sets LC_CTYPE=C.UTF-8 in its own environment then (PEP 538); tools must not see it.
    process.env.LC_CTYPE = 'C';
    delete process.env.LC_ALL;
    delete process.env.LANG;
    try {
      const { engine } = await openEngine();
      const r = await engine.run('bash', {
        command:
          // biome-ignore lint/suspicious/noTemplateCurlyInString: bash, not a template.
          'echo $PPID; grep -E "^Sig(Blk|Ign)" /proc/self/status; yes | head -c 1; echo " ${PIPESTATUS[0]}"; echo "[$LC_CTYPE|${LC_ALL-unset}|${LANG-unset}]"',
      });
      expect(r.status).toBe('success');
      const [helper, blocked, ignored, pipe, locale] = ((await streamBytes(engine, r)).stdout ?? '').split('\n');
      expect(isHelper(Number(helper))).toBe(true);
      expect(blocked).toBe('SigBlk:\t0000000000000000');
      // glibc's posix_spawn leaves its two internal signals (32 and 33) ignored; glibc programs take them back.
      expect(ignored).toBe(kind === 'python' ? 'SigIgn:\t0000000180000000' : 'SigIgn:\t0000000000000000');
      // `yes` ends by SIGPIPE (128 + 13), as it does from a shell, not by an EPIPE error.
      expect(pipe).toBe('y 141');
      expect(locale).toBe('[C|unset|unset]');
    } finally {
      restoreEnv(savedLocale);
    }
  });

  it('a quiet stream holds nothing up: another call on the same thread finishes while the first waits to write', async () => {
    const { engine } = await openEngine({ threads: 1 });
    await parentOfBash(engine);
    // One write of exactly 64 KiB on stderr (libuv's read size: a read that fills its buffer is
    // followed by another), then a wait on a FIFO with the stream still open. A worker holding a
    // blocking descriptor sat in that second read and carried no other call until the FIFO opened.
    const { dir } = await openEngine();
    const fifo = join(dir, 'go');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const slow = engine.call('bash', {
      command: `dd if=/dev/zero bs=65536 count=1 status=none >&2; read -r _ < ${fifo}; printf done`,
    });
    // The engine has the 64 KiB: the worker has read them and gone on to read that stream again.
    for await (const ev of slow.events()) {
      if (ev.type === 'progress' && ev.streams.some((st) => st.name === 'stderr' && st.bytes === 65536)) break;
      if (ev.type === 'completed') throw new Error('the call ended early');
    }
    const quick = await engine.run('bash', { command: 'echo quick' });
    expect(await streamBytes(engine, quick)).toEqual({ stdout: 'quick\n', stderr: '' });
    await fsp.writeFile(fifo, 'go\n');
    const r = await slow.result;
    const streams = r.output?.kind === 'streams' ? r.output.streams : [];
    expect(Object.fromEntries(streams.map((s) => [s.name, s.bytes]))).toEqual({ stdout: 4, stderr: 65536 });
  });

  it('gives a tool blocking stdout and stderr, and 32 MiB on both at once arrives whole', async () => {
    const { engine } = await openEngine();
    const flags = await engine.run('bash', { command: 'grep -h ^flags /proc/self/fdinfo/1 /proc/self/fdinfo/2' });
    const lines = ((await streamBytes(engine, flags)).stdout ?? '').trim().split('\n');
    expect(lines).toHaveLength(2);
    // O_NONBLOCK (04000, octal as fdinfo prints it): on neither of the tool's descriptors.
    for (const line of lines) expect(Number.parseInt(line.replace(/^flags:\s*/, ''), 8) & 0o4000).toBe(0);
    // With the worker's ends blocking (once, in the Python helper) this hung every time: the worker
    // sat in read() on one socket while the tool waited for it to drain the other.
    const r = await engine.run('bash', {
      command:
        '(yes stdout-line-abcdefghijklmnopqrstuvwxyz | head -c 33554432) & (yes stderr-line-0123456789 | head -c 33554432 >&2) & wait',
    });
    expect(r.status).toBe('success');
    const streams = r.output?.kind === 'streams' ? r.output.streams : [];
    expect(Object.fromEntries(streams.map((s) => [s.name, s.bytes]))).toEqual({ stdout: 33554432, stderr: 33554432 });
  });

  it('gives spawn failures the codes a direct spawn gives: a missing working directory is EBADARGS', async () => {
    const { engine, dir } = await openEngine();
    await parentOfBash(engine);
    const r = await engine.run('bash', { command: 'true', cwd: join(dir, 'missing') });
    expect(r).toMatchObject({ status: 'failed', error: { code: 'EBADARGS' } });
  });

  it('kills a call it started when the call is cancelled', async () => {
    const { engine } = await openEngine();
    await parentOfBash(engine);
    const sleeper = uniqueSleep();
    const handle = engine.call('bash', { command: `echo up; ${sleeper.command}` });
    expect(await waitProcess(sleeper.marker)).not.toEqual([]);
    handle.cancel();
    expect((await handle.result).status).toBe('cancelled');
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
  });

  it('dying mid-call fails the call with ETOOLFAILED, kills its process group, and a new helper serves the next call', async () => {
    const { engine } = await openEngine();
    const helper = await parentOfBash(engine);
    const sleeper = uniqueSleep();
    const handle = engine.call('bash', { command: `echo up; ${sleeper.command}` });
    // The output reached the call, so its worker holds the pipes and knows the group: the helper
    // dies mid-call. (Killed before it reported the process: the next test.)
    await waitForDisplay(handle, 'up');
    expect(await waitProcess(sleeper.marker)).not.toEqual([]);
    process.kill(helper, 'SIGKILL');
    const r = await handle.result;
    expect(r).toMatchObject({ status: 'failed', error: { code: 'ETOOLFAILED' } });
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    const next = await parentOfBash(engine);
    expect(next).not.toBe(helper);
    expect(isHelper(next)).toBe(true);
  });

  it('dying between starting a process and reporting it: the process is found by its mark and killed', async () => {
    // The helper starts processes and never reports them, as one killed at that moment would.
    process.env.SLUICE_SPAWN_HELPER_STALL = '1';
    try {
      const { engine } = await openEngine();
      const sleeper = uniqueSleep();
      const handle = engine.call('bash', { command: sleeper.command });
      const [sleep] = await waitProcess(sleeper.marker);
      const helper = parentPid(groupOf(sleep as number));
      expect(isHelper(helper)).toBe(true);
      const mark = readFileSync(`/proc/${sleep}/environ`, 'latin1')
        .split('\0')
        .find((e) => e.startsWith('SLUICE_SPAWN_MARK='));
      expect(mark).toMatch(new RegExp(`^SLUICE_SPAWN_MARK=${process.pid}-[0-9a-f]{16}$`));
      process.kill(helper, 'SIGKILL');
      const r = await handle.result;
      expect(r).toMatchObject({ status: 'failed', error: { code: 'ETOOLFAILED' } });
      expect(await waitNoProcess(sleeper.marker)).toEqual([]);
      expect(running(helper)).toBe(false);
    } finally {
      delete process.env.SLUICE_SPAWN_HELPER_STALL;
    }
  });

  it('gives tools the engine’s environment exactly: names a shell cannot hold and exported bash functions too', async () => {
    // The helper starts through /bin/sh, which passes on only names it can hold (dash drops both).
    const odd = saveEnv('a-b', 'BASH_FUNC_hello%%');
    process.env['a-b'] = 'x y=z';
    process.env['BASH_FUNC_hello%%'] = '() {  echo "hi from $1"\n}';
    try {
      const { engine } = await openEngine();
      // bash's own environment block, as it was given (/proc/$$/environ), not what bash exports.
      const r = await engine.run('bash', { command: 'echo $PPID; hello there; cat /proc/$$/environ >&2' });
      expect(r.status).toBe('success');
      const { stdout = '', stderr = '' } = await streamBytes(engine, r);
      const [helper, greeting] = stdout.split('\n');
      expect(isHelper(Number(helper))).toBe(true);
      expect(greeting).toBe('hi from there');
      const seen = Object.fromEntries(
        stderr
          .split('\0')
          .filter(Boolean)
          .map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
      );
      const { SLUICE_SPAWN_MARK: mark, ...rest } = seen;
      expect(mark).toMatch(new RegExp(`^${process.pid}-[0-9a-f]{16}$`));
      expect(rest).toEqual({ ...process.env });
    } finally {
      restoreEnv(odd);
    }
  });

  it('runs in a session of its own, ignores SIGINT and SIGHUP, and on SIGTERM kills the groups it started and ends', async () => {
    const { engine } = await openEngine();
    const helper = await parentOfBash(engine);
    // Not in the engine's group or session: a signal to the engine's group does not reach it.
    expect(groupOf(helper)).not.toBe(groupOf(process.pid));
    expect(stat(helper)[3]).not.toBe(stat(process.pid)[3]);
    const sleeper = uniqueSleep();
    const handle = engine.call('bash', { command: `echo up; ${sleeper.command}` });
    await waitForDisplay(handle, 'up');
    const [sleep] = await waitProcess(sleeper.marker);
    expect(parentPid(groupOf(sleep as number))).toBe(helper);
    process.kill(helper, 'SIGINT');
    process.kill(helper, 'SIGHUP');
    // Ignored signals are dropped when sent: had either ended it, this call would have another helper.
    expect(await parentOfBash(engine)).toBe(helper);
    expect(running(sleep as number)).toBe(true);
    process.kill(helper, 'SIGTERM');
    expect(await handle.result).toMatchObject({ status: 'failed', error: { code: 'ETOOLFAILED' } });
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    expect(await eventually(() => !running(helper))).toBe(true);
  });

  it('names the signal that ended a command; a real-time one only the Python helper can name', async () => {
    const { engine } = await openEngine();
    const term = await engine.run('bash', { command: 'kill -TERM $$' });
    expect(term).toMatchObject({ status: 'failed', metadata: { exitCode: null, signal: 'SIGTERM' } });
    // SIGRTMIN+1 (35 with glibc): Node has no name for it and reports exit code 0.
    const rt = await engine.run('bash', { command: 'kill -35 $$' });
    expect(rt.metadata).toMatchObject(
      kind === 'python' ? { exitCode: null, signal: 'SIGRTMIN+1' } : { exitCode: 0, signal: null },
    );
  });

  it('a command too long for exec fails with EBADARGS, as a direct spawn does; one just under the limit runs', async () => {
    const { engine, dir } = await openEngine();
    const helper = await parentOfBash(engine);
    const descriptors = () => readdirSync(`/proc/${helper}/fd`).length;
    const before = descriptors();
    // One argument over the kernel's 128 KiB per-string limit: the spawn fails after its pipes exist.
    for (let i = 0; i < 5; i++) {
      const long = await engine.run('bash', { command: `: ${'x'.repeat(200_000)}`, cwd: dir });
      expect(long).toMatchObject({ status: 'failed', error: { code: 'EBADARGS' } });
      expect(long.error?.message).toContain('spawn E2BIG');
    }
    // Nothing left open by the failures, and no directory held (each spawn goes back to /).
    expect(descriptors()).toBe(before);
    expect(readlinkSync(`/proc/${helper}/cwd`)).toBe('/');
    // A request of ~120 KB: more than one read of the channel on the helper's side.
    const fits = await engine.run('bash', { command: `: ${'x'.repeat(120_000)}; echo $PPID` });
    expect(fits.status).toBe('success');
    expect(Number((await streamBytes(engine, fits)).stdout)).toBe(helper);
  });

  it('runs without NODE_EXTRA_CA_CERTS and NODE_OPTIONS, and the tools it starts get both back exactly', async () => {
    const node = saveEnv('NODE_EXTRA_CA_CERTS', 'NODE_OPTIONS');
    // A value with a space and an '=' in it, and an option Node accepts (the helper would be started with it).
    const ca = '/nonexistent/extra ca=1.pem';
    process.env.NODE_EXTRA_CA_CERTS = ca;
    process.env.NODE_OPTIONS = '--no-deprecation';
    try {
      const { engine } = await openEngine();
      const r = await engine.run('bash', {
        command: 'echo $PPID; printf "%s\\n" "$NODE_EXTRA_CA_CERTS" "$NODE_OPTIONS"',
      });
      expect(r.status).toBe('success');
      const { stdout = '' } = await streamBytes(engine, r);
      const [helper, seenCa, seenOptions] = stdout.split('\n');
      expect(isHelper(Number(helper))).toBe(true);
      expect([seenCa, seenOptions]).toEqual([ca, '--no-deprecation']);
      const helperEnv = readFileSync(`/proc/${helper}/environ`, 'latin1').split('\0');
      expect(helperEnv.filter((e) => e.includes('NODE_EXTRA_CA_CERTS') || e.includes('NODE_OPTIONS'))).toEqual([]);
    } finally {
      restoreEnv(node);
    }
  });

  it('ends when its engine closes', async () => {
    const { engine } = await openEngine();
    const helper = await parentOfBash(engine);
    expect(running(helper)).toBe(true);
    await engine.close();
    expect(await eventually(() => !running(helper))).toBe(true);
  });

  it('kills what it started when the engine host is SIGKILLed, and then ends', async () => {
    const { dir } = await openEngine();
    const sleeper = uniqueSleep();
    const host = await startHost(join(dir, 'host-store'), 's1', `echo up; ${sleeper.command}`);
    const [sleep] = await waitProcess(sleeper.marker);
    // sleep's group leader is the call's bash, whose parent is the host's helper.
    const helper = parentPid(groupOf(sleep as number));
    expect(isHelper(helper, host.pid)).toBe(true);
    process.kill(host.pid, 'SIGKILL');
    await host.exited;
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    expect(await eventually(() => !running(helper))).toBe(true);
  });

  it('a helper that could not start (EMFILE) is not waited on: later spawns start directly, or through the Node helper after a Python one', () => {
    // A thread's first spawn with every descriptor taken: sh itself cannot start, so no channel and
    // no 'disconnect' ever comes. Once descriptors are free again, spawns must work.
    const script = `
import { closeSync, openSync } from 'node:fs';
import { spawnPiped } from ${JSON.stringify(new URL('../../dist/workers/spawner.js', import.meta.url).href)};
const held = [];
try { for (;;) held.push(openSync('/dev/null', 'r')); } catch {}
const first = await spawnPiped('true', [], '/').then((p) => p.exited.then(() => 'ran'), (e) => e.code ?? e.name);
for (const fd of held) closeSync(fd);
const p = await spawnPiped('/bin/sh', ['-c', 'echo second'], '/');
let out = '';
p.stdout.on('data', (c) => { out += c; });
const closed = new Promise((r) => p.stdout.once('close', r));
p.stderr.resume();
await p.exited;
await closed;
console.log(JSON.stringify({ first, out, viaHelper: p.viaHelper }));
`;
    const r = spawnSync(
      '/bin/sh',
      ['-c', 'ulimit -n 64 && exec "$0" --input-type=module -e "$1"', process.execPath, script],
      {
        encoding: 'utf8',
        timeout: 20_000,
        env: { ...process.env, SLUICE_SPAWN_HELPER: 'wait' },
      },
    );
    const out = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}');
    // The first spawn fails as a spawn (or runs, if descriptors freed in time), never with a TypeError.
    expect(['EMFILE', 'ran']).toContain(out.first);
    // A Python helper that never came up gives way to the Node one; a Node one that never came up, to none.
    expect(out).toMatchObject({ out: 'second\n', viaHelper: kind === 'python' });
    expect(r.status).toBe(0);
  });

  it('ends silently when its thread is gone before it is up: nothing on the engine stderr', async () => {
    // The process that asks for a helper exits at once: the helper finds its channel closed.
    const script = `
import { spawnPiped } from ${JSON.stringify(new URL('../../dist/workers/spawner.js', import.meta.url).href)};
spawnPiped('true', [], '/').catch(() => {});
console.log(process.pid);
process.exit(0);
`;
    // The helper inherits stderr: spawnSync returns once it, too, has closed it.
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 20_000,
      env: { ...process.env, SLUICE_SPAWN_HELPER: 'wait' },
    });
    expect(r.status).toBe(0);
    expect(r.stderr).toBe('');
    const owner = r.stdout.trim();
    const helpers = () =>
      readdirSync('/proc')
        .filter((n) => /^[0-9]+$/.test(n))
        .filter((n) => isSpawnHelperOf(cmdline(Number(n)), Number(owner)));
    expect(await eventually(() => helpers().length === 0)).toBe(true);
  });

  it.runIf(kind === 'python')(
    'a Python that cannot serve gives way to the Node helper: the first call starts directly, the next ones through it',
    async () => {
      // `/bin/false -I -S -B ...` exits at once, before it could say it is ready.
      process.env.SLUICE_SPAWN_PYTHON = '/bin/false';
      const { engine } = await openEngine();
      expect(await parentOfBash(engine)).toBe(process.pid);
      for (let i = 0; i < 3; i++) {
        const helper = await parentOfBash(engine);
        expect(cmdline(helper)).toBe(`sluice-spawner ${process.pid}`);
      }
    },
  );

  it('by default a thread starts its first spawns directly, at most two, and the rest of a burst through its helper', async () => {
    delete process.env.SLUICE_SPAWN_HELPER;
    // One thread carries all eight: one helper, one count of direct spawns.
    const { engine } = await openEngine({ threads: 1 });
    const parents = await Promise.all(Array.from({ length: 8 }, () => parentOfBash(engine)));
    const direct = parents.filter((p) => p === process.pid).length;
    expect(direct).toBeGreaterThanOrEqual(1);
    expect(direct).toBeLessThanOrEqual(2);
    const helpers = new Set(parents.filter((p) => p !== process.pid));
    expect(helpers.size).toBe(1);
    expect(isHelper([...helpers][0] as number)).toBe(true);
  });

  it("is not used with SLUICE_SPAWN_HELPER=0: bash is the engine process's child", async () => {
    process.env.SLUICE_SPAWN_HELPER = '0';
    const { engine } = await openEngine();
    for (let i = 0; i < 4; i++) expect(await parentOfBash(engine)).toBe(process.pid);
  });
});

describe('spawns in one synchronous burst', () => {
  it('start the helper only after the direct spawns’ callers have gone on, and the rest go through it', async () => {
    // This thread's own spawner (the test's): MODE and the interpreter were read when it was imported.
    const helpers = () =>
      readdirSync('/proc')
        .filter((d) => /^\d+$/.test(d))
        .filter((d) => {
          const words = cmdline(Number(d)).split(' ');
          return words.some((w) => /\/spawn-helper\.(py|js)$/.test(w)) && words.includes(String(process.pid));
        });
    const before = new Set(helpers());
    const started = Array.from({ length: 4 }, () => spawnPiped('true', [], tmpdir()));
    // The first caller's continuation: the helper (or the sh that starts it) must not exist yet, since
    // the caller reports the new group from here. libuv returns from a spawn only once the child has
    // exec'd, so a helper forked already would show its command line now.
    const atContinuation = await started[0]?.then(() => helpers().filter((p) => !before.has(p)));
    expect(atContinuation).toEqual([]);
    const processes = await Promise.all(started);
    expect(processes.map((p) => p.viaHelper)).toEqual([false, false, true, true]);
    for (const p of processes) {
      p.stdout.resume();
      p.stderr.resume();
      expect(await p.exited).toEqual({ code: 0, signal: null });
    }
    closeSpawnHelper();
  });
});
