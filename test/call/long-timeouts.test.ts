/**
 * Durations past what a timer can wait (2^31-1 ms, about 24.8 days) are
 * refused, not honoured by firing after 1 ms: the call's `timeoutMs`
 * (EBADARGS synchronously, also over HTTP), bash's `timeout` argument
 * (EBADARGS from its schema), the engine's grace period (EBADOPTION). How it
 * showed before: `timeoutMs: 2 ** 31` ended a call with ETIMEOUT at once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/index.js';
import { MAX_TIMER_MS } from '../../engine/protocol/limits.js';
import { cleanup as cleanupServers, expectNoLeaks, startTestServer } from '../server/helpers.js';
import { closeEngines, expectStoreClean, openEngine, streamBytes } from '../support/engines.js';

afterEach(async () => {
  await closeEngines();
  await cleanupServers();
});

describe('durations a timer cannot wait', () => {
  it("a call's timeoutMs above 2^31-1 (or not a positive number) is EBADARGS at once; 2^31-1 itself runs", async () => {
    const { engine } = await openEngine();
    for (const bad of [2 ** 31, 1e12, Number.POSITIVE_INFINITY, Number.NaN, 0, -1]) {
      expect(() => engine.call('bash', { command: 'true' }, { timeoutMs: bad })).toThrow(
        expect.objectContaining({ code: 'EBADARGS' }),
      );
    }
    const r = await engine.run('bash', { command: 'sleep 0.05; echo done' }, { timeoutMs: MAX_TIMER_MS });
    expect(r.status).toBe('success');
    expect(await streamBytes(engine, r)).toEqual({ stdout: 'done\n', stderr: '' });
    await expectStoreClean(engine);
  });

  it("bash's timeout above 2^31-1 fails the call with EBADARGS; 2^31-1 runs to the end", async () => {
    const { engine } = await openEngine();
    const bad = await engine.run('bash', { command: 'echo never', timeout: 2 ** 31 });
    expect(bad).toMatchObject({ status: 'failed', output: null, error: { code: 'EBADARGS' } });
    const ok = await engine.run('bash', { command: 'sleep 0.05; echo done', timeout: MAX_TIMER_MS });
    expect(ok.status).toBe('success');
    expect(await streamBytes(engine, ok)).toEqual({ stdout: 'done\n', stderr: '' });
    await expectStoreClean(engine);
  });

  it('POST /v1/calls with timeoutMs above 2^31-1 is 400 EBADARGS and starts nothing', async () => {
    const s = await startTestServer();
    const res = await s.api('/v1/calls', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tool: 'bash', args: { command: 'true' }, timeoutMs: 2 ** 31 }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('EBADARGS');
    await expectNoLeaks(s);
  });

  it('an engine grace period above 2^31-1 is EBADOPTION', async () => {
    await expect(Engine.open({ graceMs: 2 ** 31, store: '/nonexistent/never-created' })).rejects.toMatchObject({
      code: 'EBADOPTION',
    });
  });
});
