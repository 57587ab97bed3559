/**
 * The stdio transport of `sluice mcp` (server/mcp/stdio.ts) against a
 * client that stops reading: its stdout is a real pipe into `cat`, whose
 * own stdout nobody reads for a while. Each write waits for the pipe to
 * drain, so however many requests arrive in one chunk, the bytes the
 * transport buffers stay under its bound plus one reply; nothing is lost
 * once the client reads again.
 */
import { spawn } from 'node:child_process';
import { PassThrough } from 'node:stream';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { LineSplitter } from '../../engine/protocol/line-splitter.js';
import { BoundedStdioTransport } from '../../server/mcp/stdio.js';

const REPLY_BYTES = 20_000;
const BOUND = 256 * 1024;

describe('the stdio transport when the client stops reading', () => {
  it('keeps its buffered bytes under the bound plus one reply, and delivers every reply later', async () => {
    const client = spawn('cat', [], { stdio: ['pipe', 'pipe', 'ignore'] });
    const stdin = new PassThrough();
    const transport = new BoundedStdioTransport(stdin, client.stdin, { maxQueuedBytes: BOUND });
    const filler = 'x'.repeat(REPLY_BYTES);
    let handled = 0;
    let peak = 0;
    // A server that answers each request at once with a 20 KB reply.
    transport.onmessage = (m: JSONRPCMessage) => {
      handled++;
      if ('id' in m && m.id !== undefined) void transport.send({ jsonrpc: '2.0', id: m.id, result: { filler } });
      peak = Math.max(peak, transport.bufferedBytes);
    };
    await transport.start();
    client.stdout.pause();
    const n = 2000;
    // All requests in one chunk: a chunk read before the pause must not become 2000 queued replies.
    stdin.write(Array.from({ length: n }, (_, i) => `{"jsonrpc":"2.0","id":${i},"method":"ping"}\n`).join(''));
    await new Promise((r) => setTimeout(r, 500));
    expect(handled).toBeLessThan(n);
    expect(peak).toBeLessThanOrEqual(BOUND + REPLY_BYTES + 200);
    expect(transport.bufferedBytes).toBeLessThanOrEqual(BOUND + REPLY_BYTES + 200);

    // The client reads again: every reply arrives, in order.
    const ids: number[] = [];
    const lines = new LineSplitter(1024 * 1024);
    const done = new Promise<void>((resolve) => {
      client.stdout.on('data', (chunk: Buffer) => {
        lines.push(chunk, {
          line: (b) => {
            ids.push((JSON.parse(b.toString('utf8')) as { id: number }).id);
            if (ids.length === n) resolve();
          },
          oversized: () => {
            throw new Error('oversized reply');
          },
        });
      });
    });
    client.stdout.resume();
    await done;
    expect(ids).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(peak).toBeLessThanOrEqual(BOUND + REPLY_BYTES + 200);
    await transport.close();
    client.stdin.end();
    await new Promise((r) => client.once('exit', r));
  });
});
