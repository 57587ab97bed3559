/**
 * `/mcp` of a real `sluice serve`, driven by the official SDK's Client over
 * Streamable HTTP: the bearer token guards it, results are bounded with
 * working read hints, progress arrives, a cancelled call leaves no process
 * and a recorded result the HTTP API shows, and a closed MCP session is gone.
 */
import { join } from 'node:path';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import { DEFAULT_MAX_MODEL_BYTES } from '../../engine/presentation/options.js';
import { startServer } from '../../server/server.js';
import { waitNoProcess } from '../support/mcp.js';
import {
  connectHttp,
  pidsWith,
  readHint,
  removeDirs,
  type Served,
  serve,
  tempDir,
  textOf,
} from '../support/mcp-client.js';

let served: Served;

beforeAll(async () => {
  served = await serve(await tempDir());
});

afterAll(async () => {
  expect(await served.stop()).toBe(0);
  await removeDirs();
});

const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

describe('sluice serve /mcp over Streamable HTTP, with the SDK client', () => {
  it('refuses a request without the bearer token', async () => {
    const res = await fetch(`${served.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(INIT),
    });
    expect(res.status).toBe(401);
  });

  it('bounds seq 1 100000, follows its hint, keeps a failure as isError, in a session named by the client', async () => {
    const { client, transport } = await connectHttp(served, '?session=http-named');
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['bash', 'read', 'grep']);
      const r = await client.callTool({ name: 'bash', arguments: { command: 'seq 1 100000' } });
      const text = textOf(r);
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(DEFAULT_MAX_MODEL_BYTES);
      expect(r.structuredContent).toMatchObject({ status: 'success', session: 'http-named' });
      const hint = readHint(text);
      const page = await client.callTool({ name: 'read', arguments: hint });
      expect(textOf(page).split('\n')[0]).toBe(String(hint.offset + 1));
      const failed = await client.callTool({ name: 'bash', arguments: { command: 'echo kept; exit 2' } });
      expect(failed.isError).toBe(true);
      expect(textOf(failed)).toContain('kept\n');
      const sessions = await fetch(`${served.url}/v1/sessions`, {
        headers: { authorization: `Bearer ${served.token}` },
      });
      expect(JSON.stringify(await sessions.json())).toContain('http-named');
      await transport.terminateSession();
      // The closed session is gone: its id is refused.
      const again = await fetch(`${served.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${served.token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-session-id': transport.sessionId ?? 'none',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
      });
      expect(again.status).toBe(404);
    } finally {
      await client.close();
    }
  });

  it('sends progress, and a cancelled sleep 60 leaves no process and a cancelled result in the API', async () => {
    const { client } = await connectHttp(served);
    const marker = `60.${process.pid}${Date.now() % 100000}`;
    try {
      const seen: number[] = [];
      await client.callTool({ name: 'bash', arguments: { command: 'sleep 1.2; echo done' } }, undefined, {
        onprogress: (p) => seen.push(p.progress),
      });
      expect(seen.length).toBeGreaterThanOrEqual(1);
      const ac = new AbortController();
      const call = client.callTool({ name: 'bash', arguments: { command: `sleep ${marker}` } }, undefined, {
        signal: ac.signal,
      });
      const until = Date.now() + 10_000;
      while (pidsWith(`sleep ${marker}`).length === 0 && Date.now() < until)
        await new Promise((r) => setTimeout(r, 20));
      ac.abort('stop');
      await expect(call).rejects.toThrow();
      expect(await waitNoProcess(`sleep ${marker}`, 10_000)).toEqual([]);
      const auth = { headers: { authorization: `Bearer ${served.token}` } };
      let cancelled: unknown;
      for (let i = 0; i < 100 && !cancelled; i++) {
        const { calls } = (await (await fetch(`${served.url}/v1/calls`, auth)).json()) as {
          calls: Array<{ status?: string; tool: string }>;
        };
        cancelled = calls.find((c) => c.tool === 'bash' && c.status === 'cancelled');
        if (!cancelled) await new Promise((r) => setTimeout(r, 50));
      }
      expect(cancelled).toBeDefined();
    } finally {
      await client.close();
    }
  });

  it('reads an artifact of an earlier run after sluice serve restarts', async () => {
    const dir = await tempDir();
    const first = await serve(dir);
    let hint: { filePath: string; offset: number };
    try {
      const { client } = await connectHttp(first);
      hint = readHint(textOf(await client.callTool({ name: 'bash', arguments: { command: 'seq 1 5000' } })));
      await client.close();
    } finally {
      expect(await first.stop()).toBe(0);
    }
    const second = await serve(dir);
    try {
      const { client } = await connectHttp(second);
      const page = await client.callTool({ name: 'read', arguments: hint });
      expect(textOf(page).split('\n')[0]).toBe(String(hint.offset + 1));
      await client.close();
    } finally {
      expect(await second.stop()).toBe(0);
    }
  });
});

describe("/mcp within the server's bounds", () => {
  it('refuses a call past maxActiveCalls with ERESOURCELIMIT, counting MCP calls with the others', async () => {
    const dir = await tempDir();
    const engine = await Engine.open({ store: join(dir, 'store'), cwd: dir });
    const token = 'a'.repeat(64);
    const server = await startServer(engine, { token, port: 0, maxActiveCalls: 1 });
    const marker = `60.${process.pid}${(Date.now() + 7) % 100000}`;
    try {
      const { client } = await connectHttp({ url: server.url, token } as Served);
      const ac = new AbortController();
      const running = client.callTool({ name: 'bash', arguments: { command: `sleep ${marker}` } }, undefined, {
        signal: ac.signal,
      });
      const until = Date.now() + 10_000;
      while (pidsWith(`sleep ${marker}`).length === 0 && Date.now() < until)
        await new Promise((r) => setTimeout(r, 20));
      const refused = await client.callTool({ name: 'bash', arguments: { command: 'true' } }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(McpError);
      expect((refused as McpError).data).toMatchObject({ code: 'ERESOURCELIMIT' });
      const http = await fetch(`${server.url}/v1/calls`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ tool: 'bash', args: { command: 'true' } }),
      });
      expect(http.status).toBe(429);
      ac.abort();
      await running.catch(() => {});
      await client.close();
    } finally {
      await server.close();
      await engine.close();
    }
    expect(pidsWith(`sleep ${marker}`)).toEqual([]);
  });

  it('counts idle time from the last request: past maxMcpSessions the session used least recently goes', async () => {
    const dir = await tempDir();
    const engine = await Engine.open({ store: join(dir, 'store'), cwd: dir });
    const token = 'c'.repeat(64);
    const server = await startServer(engine, { token, port: 0, maxMcpSessions: 2 });
    const at = { url: server.url, token } as Served;
    try {
      // The first session opened is the one used last; the second has been idle since it opened.
      const first = await connectHttp(at);
      const second = await connectHttp(at);
      await new Promise((r) => setTimeout(r, 20));
      await first.client.listTools();
      const third = await connectHttp(at);
      expect(await second.client.listTools().catch((e: unknown) => e)).toBeInstanceOf(Error);
      expect((await first.client.listTools()).tools.length).toBeGreaterThan(0);
      expect((await third.client.listTools()).tools.length).toBeGreaterThan(0);
      await third.client.close();
      await first.client.close();
      await second.client.close().catch(() => {});
    } finally {
      await server.close();
      await engine.close();
    }
  });

  it('never evicts a session with a call in flight: past maxMcpSessions the idle one goes', async () => {
    const dir = await tempDir();
    const engine = await Engine.open({ store: join(dir, 'store'), cwd: dir });
    const token = 'b'.repeat(64);
    const server = await startServer(engine, { token, port: 0, maxMcpSessions: 2 });
    const at = { url: server.url, token } as Served;
    // A unique duration: 3 s and change, long enough to open two more sessions meanwhile.
    const marker = `3.${process.pid}${(Date.now() + 11) % 100000}`;
    try {
      // The oldest session has a call running; the second is idle.
      const busy = await connectHttp(at);
      const running = busy.client.callTool({
        name: 'bash',
        arguments: { command: `sleep ${marker}; echo busy-done` },
      });
      const until = Date.now() + 10_000;
      while (pidsWith(`sleep ${marker}`).length === 0 && Date.now() < until)
        await new Promise((r) => setTimeout(r, 20));
      const idle = await connectHttp(at);
      await idle.client.listTools();
      // A third session goes past the bound: the idle one is closed, not the busy one, older as it is.
      const third = await connectHttp(at);
      const gone = await idle.client.listTools().catch((e: unknown) => e);
      expect(gone).toBeInstanceOf(Error);
      // The busy session still answers, and its call ends with its result delivered.
      expect((await busy.client.listTools()).tools.length).toBeGreaterThan(0);
      const r = await running;
      expect(textOf(r)).toContain('busy-done');
      // Both sessions within the bound stay.
      expect((await busy.client.listTools()).tools.length).toBeGreaterThan(0);
      expect((await third.client.listTools()).tools.length).toBeGreaterThan(0);
      await third.client.close();
      await busy.client.close();
    } finally {
      await server.close();
      await engine.close();
    }
    expect(pidsWith(`sleep ${marker}`)).toEqual([]);
  });
});
