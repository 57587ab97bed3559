/**
 * SIGTERM and SIGHUP end calls cleanly: `sluice run` and an SDK host that
 * opted in with `engine.handleSignals()` cancel the running call, kill its
 * process group, record its terminal `cancelled` result (replay shows it
 * cancelled, not interrupted) and exit 143 or 129; a second signal exits at
 * once. (`sluice serve`: test/server/shutdown.test.ts.) How it showed
 * before: exit 143 at once, bash's process group still running, and the
 * session recording no result ("interrupted").
 *
 * Markers are built inside the command (`s=…; sleep $s`) so that only the
 * sleep itself carries them, not the command line of the process running it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { replaySession } from '../../engine/sessions/replay.js';
import { Store } from '../../store/store.js';
import { CLI, heldPins, tempDir } from '../store/helpers.js';
import { closeEngines, openEngine, pgrep, uniqueSleep } from '../support/engines.js';
import { eventually, startHost, stopHosts, watchdogOf } from '../support/lifecycle-host.js';

const children: ChildProcess[] = [];

afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await stopHosts();
  await closeEngines();
});

/** A sleep whose marker is not in the command that starts it. */
function hiddenSleep(prefix = ''): { marker: string; command: string } {
  const { seconds, marker } = uniqueSleep();
  return { marker, command: `${prefix}echo started; s=${seconds}; sleep $s` };
}

/** `sluice run bash` in the background, resolved once its sleep runs. */
async function runInBackground(store: string, command: string, marker: string) {
  const child = spawn(
    process.execPath,
    [CLI, 'run', 'bash', '--args', JSON.stringify({ command }), '--session', 'sig', '--json', '--store', store],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  let out = '';
  child.stdout?.on('data', (b: Buffer) => {
    out += b.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  expect(await eventually(async () => (await pgrep(marker)).length === 1)).toBe(true);
  return { child, exited, stdout: () => out };
}

/** The session's one call was recorded as cancelled (not interrupted), and nothing of the call is left. */
async function expectRecordedCancelled(store: string, session: string, marker: string): Promise<void> {
  const s = await Store.open(store);
  try {
    const replayed = await replaySession(s, session);
    expect(replayed.calls).toHaveLength(1);
    expect(replayed.calls[0]).toMatchObject({
      interrupted: false,
      result: { status: 'cancelled', complete: false, error: { code: 'ECANCELLED' } },
    });
    expect(await fsp.readdir(s.layout.tmp)).toEqual([]);
    expect(await heldPins(s.root)).toEqual([]);
  } finally {
    await s.close();
  }
  expect(await eventually(async () => (await pgrep(marker)).length === 0)).toBe(true);
}

describe('termination signals', () => {
  for (const [signal, code] of [
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const) {
    it(`sluice run: ${signal} cancels the call, records it cancelled, kills bash's group, exits ${code}`, async () => {
      const store = join(await tempDir(), 'store');
      const sleeper = hiddenSleep();
      const run = await runInBackground(store, sleeper.command, sleeper.marker);
      run.child.kill(signal);
      expect(await run.exited).toBe(code);
      expect(JSON.parse(run.stdout())).toMatchObject({ status: 'cancelled', error: { code: 'ECANCELLED' } });
      await expectRecordedCancelled(store, 'sig', sleeper.marker);
      expect(await watchdogOf(run.child.pid as number)).toEqual([]);
    });

    it(`an SDK host with engine.handleSignals(): ${signal} records the call cancelled, kills its group, exits ${code}`, async () => {
      const store = join(await tempDir(), 'store');
      const sleeper = hiddenSleep();
      const host = await startHost(store, 'sdk', sleeper.command, true);
      host.child.kill(signal);
      expect(await host.exited).toEqual({ code, signal: null });
      await expectRecordedCancelled(store, 'sdk', sleeper.marker);
      expect(await watchdogOf(host.pid)).toEqual([]);
    });
  }

  it('sluice run: a second SIGTERM while the call is being cancelled exits 143 at once, leaving nothing', async () => {
    const store = join(await tempDir(), 'store');
    // Ignores SIGTERM (so does its sleep): the cancellation waits for bash's SIGKILL.
    const sleeper = hiddenSleep("trap '' TERM; ");
    const run = await runInBackground(store, sleeper.command, sleeper.marker);
    run.child.kill('SIGTERM');
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(143);
    expect(await eventually(async () => (await pgrep(sleeper.marker)).length === 0)).toBe(true);
  });

  it('an SDK host that did not opt in dies of SIGTERM; its watchdog still kills the group', async () => {
    const store = join(await tempDir(), 'store');
    const sleeper = hiddenSleep();
    const host = await startHost(store, 'plain', sleeper.command);
    host.child.kill('SIGTERM');
    expect(await host.exited).toEqual({ code: null, signal: 'SIGTERM' });
    expect(await eventually(async () => (await pgrep(sleeper.marker)).length === 0)).toBe(true);
    const s = await Store.open(store);
    expect((await replaySession(s, 'plain')).calls[0]).toMatchObject({ interrupted: true });
    await s.close();
  });

  it('handleSignals refuses signals it cannot handle, and undoing or closing removes its listeners', async () => {
    const { engine } = await openEngine();
    const before = process.listenerCount('SIGTERM');
    expect(() => engine.handleSignals({ signals: ['SIGKILL'] })).toThrow(
      expect.objectContaining({ code: 'EBADOPTION' }),
    );
    const undo = engine.handleSignals();
    expect(process.listenerCount('SIGTERM')).toBe(before + 1);
    undo();
    expect(process.listenerCount('SIGTERM')).toBe(before);
    engine.handleSignals({ signals: ['SIGHUP'], exit: false });
    expect(process.listenerCount('SIGHUP')).toBeGreaterThan(0);
    await engine.close();
    expect(process.listenerCount('SIGHUP')).toBe(0);
    expect(() => engine.handleSignals()).toThrow(expect.objectContaining({ code: 'ECLOSED' }));
  });
});
