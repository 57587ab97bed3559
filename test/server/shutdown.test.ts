/**
 * Clean shutdown of `sluice serve` on SIGTERM/SIGHUP/SIGINT with a call
 * running: the call ends cancelled and is recorded in its session log
 * (replay shows it as cancelled, not interrupted), subscribers receive that
 * terminal event, a long poll is answered, the process exits 143 after
 * SIGTERM, 129 after SIGHUP and 0 after SIGINT, and no process it started is
 * left.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { replayedSessionSchema, subscriptionEventSchema } from '../../engine/wire/schemas.js';
import { CLI, readEvents, sleep } from './helpers.js';
import { serve, stopChildren } from './stall-support.js';

const run = promisify(execFile);

afterEach(stopChildren);

/** PIDs whose command line contains `marker`. */
async function pgrep(marker: string): Promise<number[]> {
  try {
    const { stdout } = await run('pgrep', ['-f', marker]);
    return stdout.split('\n').filter(Boolean).map(Number);
  } catch (err) {
    if ((err as { code?: unknown }).code === 1) return [];
    throw err;
  }
}

async function waitFor(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('timed out');
    await sleep(25);
  }
}

describe('sluice serve shutdown', () => {
  for (const [signal, code] of [
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const)
    it(`${signal} with a running call: cancelled, recorded, delivered to subscribers, exit ${code}, nothing left`, {
      timeout: 180_000,
    }, async () => {
      const s = await serve([]);
      const seconds = `1000.${parseInt(randomBytes(4).toString('hex'), 16)}`;
      const res = await s.api('/v1/calls', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ tool: 'bash', args: { command: `echo started; sleep ${seconds}` }, session: 'sd' }),
      });
      const { callId } = (await res.json()) as { callId: string };
      const subscribers = [
        readEvents(await s.api(`/v1/calls/${callId}/events`)),
        readEvents(await s.api(`/v1/calls/${callId}/events`)),
      ];
      await waitFor(async () => (await pgrep(`sleep ${seconds}`)).length > 0);
      const poll = s.api(`/v1/calls/${callId}?wait=60`);
      await sleep(100);

      s.child.child.kill(signal);
      const lists = await Promise.all(subscribers);
      expect(await s.child.exited).toBe(code);
      for (const list of lists) {
        const done = subscriptionEventSchema.parse(JSON.parse(list.at(-1)?.data as string));
        expect(done).toMatchObject({
          type: 'completed',
          result: { callId, status: 'cancelled', complete: false, error: { code: 'ECANCELLED' }, session: 'sd' },
        });
        expect(list[0]?.event).toBe('started');
      }
      expect(lists[0]?.at(-1)?.data).toBe(lists[1]?.at(-1)?.data);
      const polled = await poll;
      expect(polled.status).toBe(200);
      const result = await polled.json();
      expect(result).toEqual(JSON.parse(lists[0]?.at(-1)?.data as string).result);
      expect(await pgrep(`sleep ${seconds}`)).toEqual([]);
      expect(s.child.stderr()).toMatch(new RegExp(`${signal}: shutting down[\\s\\S]*stopped`));

      // Recorded: replay (a separate process, nothing running) rebuilds the cancelled call, not an interrupted one.
      const store = /store (\S+)\)/.exec(s.child.stdout())?.[1] as string;
      const { stdout } = await run(process.execPath, [CLI, 'replay', 'sd', '--json', '--store', store]);
      const replayed = replayedSessionSchema.parse(JSON.parse(stdout));
      expect(replayed.calls).toHaveLength(1);
      expect(replayed.calls[0]).toMatchObject({ callId, interrupted: false, result });
      expect(await fsp.readdir(join(store, 'tmp'))).toEqual([]);
      expect(await fsp.readdir(join(store, 'pins'))).toEqual([]);
    });

  it('SIGINT when idle exits 0', async () => {
    const s = await serve([]);
    expect((await s.api('/v1/info')).status).toBe(200);
    s.child.child.kill('SIGINT');
    expect(await s.child.exited).toBe(0);
    expect(s.child.stderr()).toMatch(/SIGINT: shutting down[\s\S]*stopped/);
  });
});
