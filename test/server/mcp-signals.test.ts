/**
 * SIGTERM and SIGHUP of a running `sluice mcp` (a real child process, the
 * SDK's Client on its stdio) with a call in flight: the call ends
 * cancelled with its result recorded in the session, the server exits
 * with 128 + the signal's number, and no process of the call is left; the
 * same for `sluice serve` with a call in flight over `/mcp` (its MCP
 * session closed under the client).
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import { waitNoProcess } from '../support/mcp.js';
import { connectHttp, MAIN, pidsWith, removeDirs, serve, tempDir } from '../support/mcp-client.js';

afterAll(removeDirs);

/** The SDK's stdio framing over a child this test spawned itself, so its exit status can be read. */
class ChildTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private readonly buffer = new ReadBuffer();

  constructor(private readonly child: ChildProcessWithoutNullStreams) {}

  async start(): Promise<void> {
    this.child.stdout.on('data', (chunk: Buffer) => {
      this.buffer.append(chunk);
      for (let m = this.buffer.readMessage(); m; m = this.buffer.readMessage()) this.onmessage?.(m);
    });
    this.child.once('close', () => this.onclose?.());
    this.child.stdin.on('error', () => {});
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (!this.child.stdin.destroyed) this.child.stdin.write(serializeMessage(message));
  }

  async close(): Promise<void> {
    this.child.stdin.end();
  }
}

/** Waits until the call's `sleep <marker>` runs. */
async function waitForSleep(marker: string): Promise<void> {
  const until = Date.now() + 10_000;
  while (pidsWith(`sleep ${marker}`).length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  expect(pidsWith(`sleep ${marker}`).length).toBe(1);
}

/** The store in `dir` has `session` with one call, recorded cancelled. */
async function expectCancelledIn(dir: string, session: string): Promise<void> {
  const engine = await Engine.open({ store: join(dir, 'store'), cwd: dir });
  try {
    const replay = await engine.replay(session);
    expect(replay.calls.map((c) => c.result.status)).toEqual(['cancelled']);
    expect(replay.calls[0]?.result.error?.code).toBe('ECANCELLED');
  } finally {
    await engine.close();
  }
}

describe('sluice mcp stopped by a signal with a call in flight', () => {
  for (const [signal, code] of [
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const) {
    it(`${signal}: the call ends cancelled and recorded, exit ${code}, no process left`, async () => {
      const dir = await tempDir();
      const session = `signal-${signal.toLowerCase()}`;
      const child = spawn(process.execPath, [MAIN, 'mcp', '--store', join(dir, 'store'), '--session', session], {
        cwd: dir,
      });
      child.stderr.resume();
      const exit = new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
      const client = new Client({ name: 'sluice-test', version: '1.0.0' });
      await client.connect(new ChildTransport(child));
      const marker = `60.${process.pid}${(Date.now() + code) % 100000}`;
      const call = client.callTool({ name: 'bash', arguments: { command: `sleep ${marker}` } }).then(
        (r) => ({ r }),
        (e: unknown) => ({ e }),
      );
      await waitForSleep(marker);
      child.kill(signal);
      expect(await exit).toBe(code);
      // The client hears the end: the cancelled result, or the connection closing under it.
      const outcome = await call;
      if ('r' in outcome) expect(outcome.r.structuredContent).toMatchObject({ status: 'cancelled' });
      expect(await waitNoProcess(`sleep ${marker}`, 10_000)).toEqual([]);
      await expectCancelledIn(dir, session);
    });
  }
});

describe('sluice serve stopped by a signal with an /mcp call in flight', () => {
  for (const [signal, code] of [
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const) {
    it(`${signal}: the call ends cancelled and recorded, the session closes, exit ${code}, no process left`, async () => {
      const dir = await tempDir();
      const session = `serve-${signal.toLowerCase()}`;
      const served = await serve(dir);
      const exit = new Promise<number | null>((resolve) => served.child.once('exit', (c) => resolve(c)));
      const { client } = await connectHttp(served, `?session=${session}`);
      const marker = `60.${process.pid}${(Date.now() + code + 7) % 100000}`;
      const call = client.callTool({ name: 'bash', arguments: { command: `sleep ${marker}` } }).then(
        (r) => ({ r }),
        (e: unknown) => ({ e }),
      );
      await waitForSleep(marker);
      served.child.kill(signal);
      expect(await exit).toBe(code);
      // The server is gone: closing the client settles the call (the cancelled result, if it came first).
      await client.close().catch(() => {});
      const outcome = await call;
      if ('r' in outcome) expect(outcome.r.structuredContent).toMatchObject({ status: 'cancelled' });
      expect(await waitNoProcess(`sleep ${marker}`, 10_000)).toEqual([]);
      expect(pidsWith(`--store ${join(dir, 'store')}`)).toEqual([]);
      await expectCancelledIn(dir, session);
    });
  }
});
