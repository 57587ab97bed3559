/**
 * MCP servers that cannot start, invalid configurations, and process cleanup
 * (a wrapper's children included) when the engine closes.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanup,
  finish,
  fixtureServer,
  MCP_SERVER,
  openEngine,
  openMcpEngine,
  pgrep,
  serverStats,
  waitNoProcess,
} from '../support/mcp.js';

afterEach(cleanup);

/** Resolves once `pred` holds, polling. */
async function until(pred: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('starting servers', () => {
  it('a command that does not exist is EBADMODULE naming the server; nothing is registered', async () => {
    const env = await openEngine();
    const before = env.engine.tools().length;
    const err = await env.engine
      .addMcpServer({ name: 'ghost', command: `/nonexistent/${env.marker}` })
      .catch((e: unknown) => e);
    expect((err as { code?: string }).code).toBe('EBADMODULE');
    expect((err as Error).message).toContain('"ghost"');
    expect((err as Error).message).toContain('ENOENT');
    expect(env.engine.tools()).toHaveLength(before);
    await finish(env);
  });

  it('a server that exits during the handshake is EBADMODULE with its stderr; the name can be reused', async () => {
    const env = await openEngine();
    const err = await env.engine
      .addMcpServer({
        name: 'broken',
        command: process.execPath,
        args: ['-e', `console.error("no config for ${env.marker}"); process.exit(2)`],
      })
      .catch((e: unknown) => e);
    expect((err as { code?: string }).code).toBe('EBADMODULE');
    expect((err as Error).message).toContain('exit code 2');
    expect((err as Error).message).toContain(`no config for ${env.marker}`);
    const tools = await env.engine.addMcpServer(fixtureServer('broken', env.marker));
    expect(tools.map((t) => t.name)).toContain('broken.echo');
    await finish(env);
  });

  it('invalid or duplicate configurations are EBADOPTION quoting the value', async () => {
    const env = await openMcpEngine();
    const bad = [
      { name: 'Bad Name', command: 'x' },
      { name: 'dotted.name', command: 'x' },
      { name: 'ok', command: '' },
      { name: 'ok', command: 'x', args: 'not-an-array' },
      { name: 'ok', command: 'x', url: 'http://localhost' },
      { name: 'fx', command: process.execPath, args: [MCP_SERVER, env.marker] },
    ];
    for (const config of bad) {
      const err = await env.engine.addMcpServer(config as never).catch((e: unknown) => e);
      expect((err as { code?: string }).code, JSON.stringify(config)).toBe('EBADOPTION');
    }
    const err = await env.engine.addMcpServer({ name: 'Bad Name', command: 'x' }).catch((e: unknown) => e);
    expect((err as Error).message).toContain('"Bad Name"');
    // Only the first fx server runs.
    expect(await pgrep(env.marker)).toHaveLength(1);
    await finish(env);
  });
});

describe('process lifetime', () => {
  it('if the MCP host thread dies, calls in flight fail with EWORKERCRASH, its servers are killed, and a new thread serves the next call', async () => {
    const env = await openMcpEngine();
    const { engine } = env;
    const before = await serverStats(engine);
    const h = engine.call('fx.slow', { ms: 60_000 });
    await until(async () => (await serverStats(engine)).calls > before.calls);
    // Reach into the engine to kill the thread: nothing public can, which is the point.
    const internals = engine as unknown as { mcp: { host: { worker: { terminate(): Promise<number> } } } };
    await internals.mcp.host.worker.terminate();
    const r = await h.result;
    expect(r.status).toBe('failed');
    expect(r.error?.code).toBe('EWORKERCRASH');
    expect(r.error?.message).toContain('MCP host thread died');
    expect(await waitNoProcess(env.marker)).toEqual([]);
    const after = await serverStats(engine);
    expect(after.pid).not.toBe(before.pid);
    expect((await engine.run('fx.echo', { text: 'back' })).model).toBe('back');
    await finish(env);
  });

  it('closing the engine during a call ends the call and kills the server', async () => {
    const env = await openMcpEngine();
    const h = env.engine.call('fx.slow', { ms: 60_000 });
    await until(async () => (await pgrep(env.marker)).length === 1);
    await new Promise((r) => setTimeout(r, 200));
    await env.engine.close();
    expect((await h.result).status).toBe('cancelled');
    await finish(env);
  });

  it("the server runs in its own process group: a wrapper's background children are killed too", async () => {
    const env = await openEngine();
    // A background child carrying the marker (as its $0), then the server itself in place of the wrapper.
    const wrapper = `bash -c 'sleep 1000; true' ${env.marker} & exec "${process.execPath}" "${MCP_SERVER}" ${env.marker}`;
    await env.engine.addMcpServer({ name: 'wrapped', command: 'bash', args: ['-c', wrapper] });
    expect((await env.engine.run('wrapped.echo', { text: 'hi' })).model).toBe('hi');
    expect((await pgrep(env.marker)).length).toBeGreaterThanOrEqual(2);
    await finish(env);
  });
});
