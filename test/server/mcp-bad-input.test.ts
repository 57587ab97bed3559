/**
 * `sluice mcp` against a client that misbehaves on the wire: malformed
 * JSON-RPC gets JSON-RPC's typed errors and the connection goes on; a client
 * that sends requests but never reads stdout holds the server to a bounded
 * amount of memory, and nothing is lost once it reads again.
 */
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { LineSplitter } from '../../engine/protocol/line-splitter.js';
import { uniqueSleep, waitNoProcess } from '../support/engines.js';
import { exited, MAIN, memoryOf, removeDirs, tempDir } from '../support/mcp-client.js';

afterAll(removeDirs);

interface Raw {
  child: ChildProcessByStdio<Writable, Readable, Readable>;
  /** Every message received so far. */
  messages: Array<Record<string, unknown>>;
  send(line: string): void;
  /** Resolves with the first message received that `match` accepts. */
  next(match: (m: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

async function raw(): Promise<Raw> {
  const dir = await tempDir();
  const child = spawn(process.execPath, [MAIN, 'mcp', '--store', join(dir, 'store')], {
    cwd: dir,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stderr.resume();
  const messages: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  const lines = new LineSplitter(64 * 1024 * 1024);
  const sink = {
    line: (b: Buffer) => {
      messages.push(JSON.parse(b.toString('utf8')));
      for (const w of waiters.splice(0)) w();
    },
    oversized: () => {
      throw new Error('oversized reply');
    },
  };
  child.stdout.on('data', (chunk: Buffer) => lines.push(chunk, sink));
  const next = async (match: (m: Record<string, unknown>) => boolean) => {
    for (;;) {
      const found = messages.find(match);
      if (found) return found;
      await new Promise<void>((r) => waiters.push(r));
    }
  };
  return {
    child,
    messages,
    send: (line) => child.stdin.write(`${line}\n`),
    next,
    close: async () => {
      child.stdin.end();
      await exited(child.pid as number);
    },
  };
}

const INIT = JSON.stringify({
  jsonrpc: '2.0',
  id: 'init',
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

const byId = (id: unknown) => (m: Record<string, unknown>) => m.id === id;
const errorOf = (m: Record<string, unknown>) => m.error as { code: number; message: string };

describe('sluice mcp with malformed input', () => {
  it('answers bad JSON, non-JSON-RPC, unknown methods and bad params with typed errors, and keeps serving', async () => {
    const r = await raw();
    try {
      r.send('{this is not json');
      const parse = await r.next((m) => m.id === null && errorOf(m)?.code === -32700);
      expect(errorOf(parse).message).toMatch(/^Parse error/);
      r.send('{"jsonrpc":"2.0","id":7,"params":1}');
      expect(errorOf(await r.next(byId(7))).code).toBe(-32600);
      r.send(INIT);
      const init = await r.next(byId('init'));
      expect((init.result as { serverInfo: { name: string } }).serverInfo.name).toBe('sluice');
      r.send('{"jsonrpc":"2.0","method":"notifications/initialized"}');
      r.send('{"jsonrpc":"2.0","id":8,"method":"no/such/method"}');
      expect(errorOf(await r.next(byId(8))).code).toBe(-32601);
      r.send('{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"arguments":{}}}');
      expect(errorOf(await r.next(byId(9))).code).toBe(-32602);
      // A line past the bound (4 MiB) is refused without being held, and the next one is served.
      r.send(`{"jsonrpc":"2.0","id":10,"method":"tools/list","pad":"${'x'.repeat(5 * 1024 * 1024)}"}`);
      r.send('{"jsonrpc":"2.0","id":11,"method":"tools/list"}');
      const tools = await r.next(byId(11));
      expect((tools.result as { tools: unknown[] }).tools.length).toBe(3);
      expect(r.messages.some((m) => m.id === 10)).toBe(false);
      expect(r.messages.some((m) => m.id === null && /longer than/.test(errorOf(m)?.message ?? ''))).toBe(true);
    } finally {
      await r.close();
    }
  });

  it('does not count cancelled requests as waiting: 300 cancels later it still reads, answers and hears EOF', async () => {
    const r = await raw();
    const sleep = uniqueSleep();
    try {
      r.send(INIT);
      await r.next(byId('init'));
      r.send('{"jsonrpc":"2.0","method":"notifications/initialized"}');
      // Past maxPending (256): each cancelled call gets no response, by the MCP spec.
      for (let i = 0; i < 300; i++) {
        r.send(
          JSON.stringify({
            jsonrpc: '2.0',
            id: i,
            method: 'tools/call',
            params: { name: 'bash', arguments: { command: sleep.command } },
          }),
        );
        r.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: i } }));
      }
      // In a later read than the calls (a leak would have paused stdin by then); the pause cannot fail the test.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      r.send('{"jsonrpc":"2.0","id":"ping","method":"ping"}');
      expect(await r.next(byId('ping'))).toMatchObject({ result: {} });
    } finally {
      await r.close();
    }
    expect(await waitNoProcess(sleep.marker)).toEqual([]);
  });

  it('a client that never reads stdout holds the server to bounded memory, and loses nothing', async () => {
    const r = await raw();
    try {
      r.send(INIT);
      await r.next(byId('init'));
      r.send('{"jsonrpc":"2.0","method":"notifications/initialized"}');
      const pid = r.child.pid as number;
      const before = memoryOf(pid).rss;
      r.child.stdout.pause();
      // tools/list is about 9 KB a reply: 4000 unread replies would be about 35 MB.
      const n = 4000;
      for (let i = 0; i < n; i++) r.send(`{"jsonrpc":"2.0","id":${i},"method":"tools/list"}`);
      await new Promise((res) => setTimeout(res, 1500));
      const blocked = memoryOf(pid).rss;
      // The server stopped reading: requests wait in our stdin, not in its memory.
      expect(r.child.stdin.writableLength).toBeGreaterThan(0);
      expect(blocked - before).toBeLessThan(24);
      r.child.stdout.resume();
      await r.next(byId(n - 1));
      const ids = new Set(r.messages.map((m) => m.id));
      for (let i = 0; i < n; i++) expect(ids.has(i)).toBe(true);
    } finally {
      await r.close();
    }
  });
});
