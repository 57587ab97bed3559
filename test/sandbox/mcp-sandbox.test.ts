/** An MCP server started under a sandbox policy: its own PID namespace, the policy narrowing the engine's. */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { sandboxSupport } from '../../workers/sandbox/support.js';
import { cleanup, finish, fixtureServer, openEngine } from '../support/mcp.js';

afterEach(cleanup);

/**
 * The checkout, as the servers' working directory: a sandbox's /tmp is a
 * fresh one, and its working directory is what is bound back into it, so
 * the fixture script and its packages are there from a clone under /tmp
 * too (.ci/clone-test.sh).
 */
const checkout = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

describe.runIf(sandboxSupport().available)('an MCP server under a sandbox', () => {
  it('runs in a PID namespace of its own, its tools answering as before', async () => {
    const env = await openEngine();
    await env.engine.addMcpServer(
      fixtureServer('fx', env.marker, { cwd: checkout, sandbox: { filesystem: 'read-only' } }),
    );
    const r = await env.engine.run('fx.stats', {});
    expect(r.status).toBe('success');
    const stats = JSON.parse(r.model.slice(r.model.indexOf('{'), r.model.lastIndexOf('}') + 1)) as { pid: number };
    // bwrap's init is 1 inside; the server is one of the first processes after it.
    expect(stats.pid).toBeLessThan(10);
    const echoed = await env.engine.run('fx.echo', { text: 'hi' });
    expect(echoed.model).toContain('hi');
    await finish(env);
  });

  it('takes the engine sandbox by default and refuses an entry that loosens it (EBADOPTION)', async () => {
    const env = await openEngine({ sandbox: { filesystem: 'read-only' } });
    await expect(
      env.engine.addMcpServer(fixtureServer('fx', env.marker, { cwd: checkout, sandbox: { filesystem: 'off' } })),
    ).rejects.toMatchObject({ code: 'EBADOPTION', details: { option: 'sandbox' } });
    await env.engine.addMcpServer(fixtureServer('fy', env.marker, { cwd: checkout }));
    const stats = await env.engine.run('fy.stats', {});
    expect(Number(/"pid":(\d+)/.exec(stats.model)?.[1])).toBeLessThan(10);
    await finish(env);
  });
});
