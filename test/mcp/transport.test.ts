/**
 * The stdio transport to an upstream server (workers/mcp/transport.ts),
 * run in this thread against a real child: a write waiting for a full pipe
 * to drain ends when the server dies instead of waiting forever.
 */
import { describe, expect, it } from 'vitest';
import { GroupStdioTransport } from '../../workers/mcp/transport.js';
import { uniqueMarker, waitNoProcess } from '../support/mcp.js';

describe('the stdio transport to an MCP server', () => {
  it('rejects a send waiting for drain when the server exits without reading', async () => {
    const marker = uniqueMarker();
    // Never reads its stdin; exits after a while with the pipe full.
    const script = `setTimeout(() => process.exit(0), 400); // ${marker}`;
    const t = new GroupStdioTransport(
      {
        name: 'deaf',
        command: process.execPath,
        args: ['-e', script],
        env: {},
        cwd: process.cwd(),
        maxMessageBytes: 1024 * 1024,
      },
      { spawned: () => {}, exited: () => {}, spilled: () => {} },
      process.cwd(),
    );
    await t.start();
    const big = { jsonrpc: '2.0' as const, method: 'notifications/message', params: { data: 'x'.repeat(4 << 20) } };
    const sent = t.send(big).then(
      () => 'resolved',
      (e: unknown) => `rejected: ${(e as Error).message}`,
    );
    const outcome = await Promise.race([sent, new Promise((r) => setTimeout(() => r('still waiting'), 10_000))]);
    expect(outcome).toBe('rejected: the MCP server exited before it read the message');
    await t.close();
    expect(await waitNoProcess(marker)).toEqual([]);
  });
});
