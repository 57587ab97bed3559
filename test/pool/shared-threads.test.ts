/**
 * Many calls per worker thread: a shared thread carries many calls at once;
 * a tool declared `isolation: 'thread'` gets a thread of its own; a crash of
 * a shared thread fails the calls it carries with EWORKERCRASH and the
 * engine serves the next call on a fresh thread; a cancelled shared call
 * that ignores its signal is let go without harming its thread-mates, unless
 * it blocks the thread's event loop, which terminates the thread; a thread
 * with leftovers retires when idle without dropping the calls handed to it.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Engine } from '../../engine/engine.js';
import {
  closeEngines,
  engineWith,
  expectPoolServes,
  expectStoreClean,
  fixture,
  singleText,
  sleep,
  streamBytes,
  uniqueSleep,
  waitForDisplay,
  waitNoProcess,
  waitProcess,
} from '../support/engines.js';

afterEach(closeEngines);

/** Waits (bounded only as a failure bound) until `path` exists. */
async function waitFile(path: string, ms = 30_000): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    if (
      await fsp.stat(path).then(
        () => true,
        () => false,
      )
    )
      return;
    if (Date.now() > until) throw new Error(`${path} never appeared`);
    await sleep(20);
  }
}

/** A bash command that announces itself in `started`, then waits until `release` exists. */
function waitingCommand(started: string, release: string, out: string): string {
  return `touch ${started}; n=0; while [ ! -e ${release} ]; do n=$((n+1)); [ $n -gt 3000 ] && exit 7; sleep 0.02; done; echo ${out}`;
}

/**
 * A mate bash call waiting for `release`, then a shared-stubborn call on its
 * thread cancelled (and so abandoned): returns the mate, the release file and
 * the stubborn call's result.
 */
async function abandonBesideMate(engine: Engine, dir: string, tag = '') {
  const started = join(dir, `started${tag}`);
  const release = join(dir, `release${tag}`);
  const mate = engine.call('bash', { command: waitingCommand(started, release, 'mate done') });
  await waitFile(started);
  const stubborn = engine.call('shared-stubborn', {});
  await waitForDisplay(stubborn, 'ready');
  stubborn.cancel('stop');
  return { mate, release, result: await stubborn.result };
}

describe('shared threads', () => {
  it('one thread carries 16 calls at once: all run together (a barrier) and all succeed', async () => {
    const { engine, dir } = await engineWith([], { threads: 1, callsPerThread: 16, concurrency: 16 });
    const barrier = join(dir, 'barrier');
    await fsp.mkdir(barrier);
    const command = (i: number) =>
      `touch ${barrier}/${i}; n=0; while [ $(ls ${barrier} | wc -l) -lt 16 ]; do n=$((n+1)); [ $n -gt 3000 ] && exit 7; sleep 0.02; done; echo all ${i}`;
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) => engine.run('bash', { command: command(i) })),
    );
    for (const [i, r] of results.entries()) {
      expect(r.status).toBe('success');
      expect(await streamBytes(engine, r)).toEqual({ stdout: `all ${i}\n`, stderr: '' });
    }
    expect(engine.threads).toBe(1);
    await expectStoreClean(engine);
  });

  it('a tool declared isolation thread runs on a thread of its own, and tools() says so', async () => {
    const { engine } = await engineWith(['crash', 'echo'], { threads: 1 });
    const byName = Object.fromEntries(engine.tools().map((t) => [t.name, t.isolation]));
    expect(byName).toMatchObject({ crash: 'thread', echo: 'shared', bash: 'shared', read: 'shared' });
    const sleeper = uniqueSleep();
    const bash = engine.call('bash', { command: sleeper.command });
    await waitProcess(sleeper.marker);
    // The crash takes down its own thread only: the shared thread's bash call is untouched.
    const crashed = await engine.run('crash', { how: 'exit' });
    expect(crashed).toMatchObject({ status: 'failed', error: { code: 'EWORKERCRASH' } });
    expect(engine.threads).toBeGreaterThanOrEqual(1);
    bash.cancel();
    expect((await bash.result).status).toBe('cancelled');
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    await expectStoreClean(engine);
  });

  it('a crashing shared tool fails every call its thread carries with EWORKERCRASH; the next call gets a fresh thread', async () => {
    const { engine } = await engineWith(['shared-crash'], { threads: 1 });
    const sleeper = uniqueSleep();
    const mate = engine.call('bash', { command: `echo mate; ${sleeper.command}` });
    await waitProcess(sleeper.marker);
    const crashed = await engine.run('shared-crash', { how: 'exit', partial: 'before exit\n' });
    expect(crashed).toMatchObject({ status: 'failed', complete: false, error: { code: 'EWORKERCRASH' } });
    expect(await singleText(engine, crashed)).toBe('before exit\n');
    const m = await mate.result;
    expect(m).toMatchObject({ status: 'failed', complete: false, error: { code: 'EWORKERCRASH' } });
    expect(m.error?.message).toMatch(/exited with code: 3/);
    // Its accepted output is published, and its process group is killed with it.
    expect((await streamBytes(engine, m)).stdout).toBe('mate\n');
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    await expectPoolServes(engine);
    await expectStoreClean(engine);
  });

  it('a cancelled shared call that ignores its signal is let go after graceMs; its thread-mate finishes normally', async () => {
    const { engine, dir } = await engineWith(['shared-stubborn'], { threads: 1, graceMs: 200 });
    const { mate, release, result: r } = await abandonBesideMate(engine, dir);
    expect(r).toMatchObject({ status: 'cancelled', complete: false, error: { code: 'ECANCELLED' } });
    expect(await singleText(engine, r)).toBe('stubborn\n');
    // The thread was not terminated: the mate it carries is still running and succeeds.
    await fsp.writeFile(release, '');
    const m = await mate.result;
    expect(m).toMatchObject({ status: 'success', complete: true });
    expect(await streamBytes(engine, m)).toEqual({ stdout: 'mate done\n', stderr: '' });
    // The thread (tainted by the abandoned tool) retires once idle; calls keep being served.
    await expectPoolServes(engine);
    await expectPoolServes(engine);
    await expectStoreClean(engine);
  });

  it('a cancelled shared call that blocks its event loop has its thread terminated; the mate fails with EWORKERCRASH', async () => {
    const { engine } = await engineWith(['shared-spin'], { threads: 1, graceMs: 200 });
    const sleeper = uniqueSleep();
    const mate = engine.call('bash', { command: sleeper.command });
    await waitProcess(sleeper.marker);
    const spin = engine.call('shared-spin', {});
    await waitForDisplay(spin, 'ready');
    spin.cancel();
    const r = await spin.result;
    expect(r).toMatchObject({ status: 'cancelled', complete: false });
    expect(await singleText(engine, r)).toBe('partial\n');
    const m = await mate.result;
    expect(m).toMatchObject({ status: 'failed', error: { code: 'EWORKERCRASH' } });
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    await expectPoolServes(engine);
    await expectStoreClean(engine);
  });

  it('calls started while a blocked thread waits to be terminated run on another thread and succeed', async () => {
    const { engine } = await engineWith(['shared-spin'], { threads: 1, graceMs: 200 });
    const spin = engine.call('shared-spin', {});
    await waitForDisplay(spin, 'ready');
    spin.cancel();
    expect(await spin.result).toMatchObject({ status: 'cancelled', complete: false });
    // The spinning thread is still there (terminated only after it fails to answer the abandon).
    const calls = Array.from({ length: 3 }, (_, i) => engine.call('bash', { command: `echo after ${i}` }));
    const results = await Promise.all(calls.map((c) => c.result));
    for (const [i, r] of results.entries()) {
      expect(r).toMatchObject({ status: 'success', complete: true });
      expect(await streamBytes(engine, r)).toEqual({ stdout: `after ${i}\n`, stderr: '' });
    }
    await expectPoolServes(engine);
    await expectStoreClean(engine);
  });

  it('calls handed to a thread that retires with an abandoned call run elsewhere and succeed', async () => {
    const { engine, dir } = await engineWith(['shared-stubborn'], { threads: 2, graceMs: 200 });
    // The mate keeps the tainted thread from retiring while the new calls arrive.
    const { mate, release, result } = await abandonBesideMate(engine, dir);
    expect(result).toMatchObject({ status: 'cancelled' });
    const calls = Array.from({ length: 6 }, (_, i) => engine.call('bash', { command: `echo next ${i}` }));
    const results = await Promise.all(calls.map((c) => c.result));
    for (const [i, r] of results.entries()) {
      expect(r).toMatchObject({ status: 'success', complete: true });
      expect(await streamBytes(engine, r)).toEqual({ stdout: `next ${i}\n`, stderr: '' });
    }
    await fsp.writeFile(release, '');
    expect(await mate.result).toMatchObject({ status: 'success', complete: true });
    await expectPoolServes(engine);
    await expectStoreClean(engine);
  });

  it('with minThreads 0, a call queued while the only thread retires runs on a new thread; a cancelled one ends ECANCELLED', async () => {
    const { engine, dir } = await engineWith(['shared-stubborn'], { threads: 1, minThreads: 0, graceMs: 200 });
    const { mate, release, result } = await abandonBesideMate(engine, dir);
    expect(result).toMatchObject({ status: 'cancelled' });
    // The only thread retires, and no thread may be added: both calls wait in piscina's queue.
    const next = engine.call('bash', { command: 'echo after retire' });
    const sleeper = uniqueSleep();
    const queued = engine.call('bash', { command: sleeper.command });
    queued.cancel('stop');
    await fsp.writeFile(release, '');
    expect(await mate.result).toMatchObject({ status: 'success', complete: true });
    // piscina starts no thread by itself once the retiring one has exited (minThreads 0).
    const r = await next.result;
    expect(r).toMatchObject({ status: 'success', complete: true });
    expect(await streamBytes(engine, r)).toEqual({ stdout: 'after retire\n', stderr: '' });
    expect(await queued.result).toMatchObject({ status: 'cancelled', complete: false, error: { code: 'ECANCELLED' } });
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    await expectPoolServes(engine);
    await expectStoreClean(engine);
  });

  it('calls queued while every thread retires at maxThreads run once the threads have exited', async () => {
    // spread 2: each thread carries a mate and a stubborn call.
    const { engine, dir } = await engineWith(['shared-stubborn'], {
      threads: 2,
      callsPerThread: 2,
      concurrency: 4,
      graceMs: 200,
    });
    const a = await abandonBesideMate(engine, dir, 'a');
    const b = await abandonBesideMate(engine, dir, 'b');
    expect(a.result).toMatchObject({ status: 'cancelled' });
    expect(b.result).toMatchObject({ status: 'cancelled' });
    const calls = Array.from({ length: 2 }, (_, i) => engine.call('bash', { command: `echo queued ${i}` }));
    await fsp.writeFile(a.release, '');
    await fsp.writeFile(b.release, '');
    expect(await a.mate.result).toMatchObject({ status: 'success', complete: true });
    expect(await b.mate.result).toMatchObject({ status: 'success', complete: true });
    const results = await Promise.all(calls.map((c) => c.result));
    for (const [i, r] of results.entries()) {
      expect(r).toMatchObject({ status: 'success', complete: true });
      expect(await streamBytes(engine, r)).toEqual({ stdout: `queued ${i}\n`, stderr: '' });
    }
    await expectPoolServes(engine);
    await expectStoreClean(engine);
  });

  it('a shared thread with leftovers retires when idle: 10 rounds of a leaky call then a call all succeed', async () => {
    const { engine } = await engineWith(['leaky'], { threads: 1 });
    for (let i = 0; i < 10; i++) {
      // The leaked timer would throw in 60 s; the thread must be gone long before.
      const [leaky, next] = await Promise.all([
        engine.run('leaky', { delayMs: 60_000 }),
        engine.run('bash', { command: `echo round ${i}` }),
      ]);
      expect(leaky).toMatchObject({ status: 'success', complete: true });
      expect(next).toMatchObject({ status: 'success', complete: true });
      expect(await streamBytes(engine, next)).toEqual({ stdout: `round ${i}\n`, stderr: '' });
      const after = await engine.run('bash', { command: `echo after ${i}` });
      expect(await streamBytes(engine, after)).toEqual({ stdout: `after ${i}\n`, stderr: '' });
    }
    await expectStoreClean(engine);
  });

  it('an invalid isolation is EBADDECL at registration, quoting the value', async () => {
    const { engine } = await engineWith([]);
    await expect(engine.register(fixture('bad-isolation'))).rejects.toMatchObject({
      code: 'EBADDECL',
      message: /"process"/,
    });
    expect(engine.tools().map((t) => t.name)).not.toContain('bad-isolation');
  });

  it('threads and callsPerThread are validated: EBADOPTION names the option', async () => {
    for (const [option, value] of [
      ['threads', 0],
      ['threads', 257],
      ['callsPerThread', 0],
      ['callsPerThread', 1.5],
    ] as const) {
      await expect(engineWith([], { [option]: value })).rejects.toMatchObject({
        code: 'EBADOPTION',
        details: { option },
      });
    }
  });
});
