/**
 * MCP calls that do not end normally: cancellation mid-call (the server keeps
 * serving), a server dying mid-call (the next call respawns it), and a result
 * over the message bound.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, finish, openMcpEngine, pgrep, serverStats, waitNoProcess } from '../support/mcp.js';

afterEach(cleanup);

/** Resolves once `pred` holds, polling. */
async function until(pred: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('cancellation', () => {
  it('a slow call cancelled mid-call ends cancelled; the server is told and answers the next call', async () => {
    // A grace period longer than the test may take: only a cooperative end can end the call.
    const env = await openMcpEngine({ graceMs: 600_000 });
    const { engine } = env;
    const before = await serverStats(engine);
    const h = engine.call('fx.slow', { ms: 60_000 });
    // Wait until the server is actually running the tool.
    await until(async () => (await serverStats(engine)).calls > before.calls);
    h.cancel('user pressed stop');
    const r = await h.result;
    expect(r.status).toBe('cancelled');
    expect(r.error?.code).toBe('ECANCELLED');
    expect(r.complete).toBe(false);
    // The server got notifications/cancelled and the same process answers the next call.
    await until(async () => (await serverStats(engine)).cancelled === 1);
    const after = await serverStats(engine);
    expect(after.pid).toBe(before.pid);
    const echo = await engine.run('fx.echo', { text: 'still here' });
    expect(echo.model).toBe('still here');
    await finish(env);
  });

  it("the caller's AbortSignal and the engine's timeoutMs also end an MCP call, keeping the connection", async () => {
    const env = await openMcpEngine();
    const { engine } = env;
    const before = await serverStats(engine);
    const ac = new AbortController();
    const pending = engine.run('fx.slow', { ms: 60_000 }, { signal: ac.signal });
    await until(async () => (await serverStats(engine)).calls > before.calls);
    ac.abort();
    expect((await pending).status).toBe('cancelled');
    await until(async () => (await serverStats(engine)).cancelled === 1);
    const timed = await engine.run('fx.slow', { ms: 60_000 }, { timeoutMs: 500 });
    expect(timed.status).toBe('failed');
    expect(timed.error?.code).toBe('ETIMEOUT');
    // Every slow call that reached the server was cancelled there (a loaded machine may time out before it does).
    await until(async () => {
      const s = await serverStats(engine);
      return s.cancelled === s.calls;
    });
    const after = await serverStats(engine);
    expect(after.pid).toBe(before.pid);
    expect((await engine.run('fx.echo', { text: 'ok' })).model).toBe('ok');
    await finish(env);
  });
});

describe('a server that dies', () => {
  it('dying mid-call fails the call with EWORKERCRASH and its stderr; no process leaks; the next call respawns it', async () => {
    const env = await openMcpEngine();
    const { engine } = env;
    const first = await serverStats(engine);
    const r = await engine.run('fx.die', { code: 3 });
    expect(r.status).toBe('failed');
    expect(r.complete).toBe(false);
    expect(r.error?.code).toBe('EWORKERCRASH');
    expect(r.error?.message).toContain('exit code 3');
    expect(r.error?.message).toContain('fixture: dying on purpose');
    expect(r.model).toContain('[Status: failed. EWORKERCRASH');
    // The dead server is gone and nothing was left behind.
    expect(await waitNoProcess(env.marker)).toEqual([]);
    // The next call starts a new server process.
    const next = await serverStats(engine);
    expect(next.pid).not.toBe(first.pid);
    expect(next.calls).toBe(0);
    expect(await pgrep(env.marker)).toEqual([next.pid]);
    await finish(env);
  });

  it('a result larger than maxMessageBytes fails that call with ERESOURCELIMIT; the connection stays', async () => {
    const env = await openMcpEngine({}, { maxMessageBytes: 64 * 1024 });
    const { engine } = env;
    const before = await serverStats(engine);
    const r = await engine.run('fx.big', { bytes: 200_000 });
    expect(r.status).toBe('failed');
    expect(r.error?.code).toBe('ERESOURCELIMIT');
    expect(r.error?.message).toContain('65536');
    // The same server process answers the next calls: the oversized line was skipped, not fatal.
    expect((await serverStats(engine)).pid).toBe(before.pid);
    const small = await engine.run('fx.big', { bytes: 1000 });
    expect(small.status).toBe('success');
    expect(small.output?.kind === 'single' && small.output.bytes).toBe(1000);
    await finish(env);
  });
});
