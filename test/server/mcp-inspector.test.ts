/**
 * The MCP Inspector's CLI mode (`@modelcontextprotocol/inspector --cli`),
 * a client nobody here wrote, against `sluice mcp`: tools/list and
 * tools/call give what the SDK's Client gets.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { connectStdio, MAIN, ROOT, removeDirs, tempDir } from '../support/mcp-client.js';

afterAll(removeDirs);

const INSPECTOR = join(ROOT, 'node_modules', '.bin', 'mcp-inspector');

function inspector(dir: string, args: string[]): Promise<{ code: number | null; json: Record<string, unknown> }> {
  const child = spawn(
    process.execPath,
    [INSPECTOR, '--cli', process.execPath, MAIN, 'mcp', '--store', join(dir, 'store'), ...args],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    out += d;
  });
  child.stderr.resume();
  return new Promise((res) => child.on('close', (code) => res({ code, json: JSON.parse(out) })));
}

describe('the MCP Inspector CLI against sluice mcp', () => {
  it('lists the same tools and gets the same call result as the SDK client', async () => {
    const dir = await tempDir();
    const [list, call] = await Promise.all([
      inspector(dir, ['--method', 'tools/list']),
      inspector(dir, ['--method', 'tools/call', '--tool-name', 'bash', '--tool-arg', 'command=seq 1 3; exit 4']),
    ]);
    expect(list.code).toBe(0);
    expect(call.code).toBe(0);
    const s = await connectStdio(dir);
    try {
      expect(list.json.tools).toEqual((await s.client.listTools()).tools);
      const sdk = await s.client.callTool({ name: 'bash', arguments: { command: 'seq 1 3; exit 4' } });
      expect(call.json.content).toEqual(sdk.content);
      expect(call.json.isError).toBe(true);
      const pick = (r: Record<string, unknown>) => {
        const { callId: _c, session: _s, durationMs: _d, metadata, ...rest } = r;
        return { ...rest, exitCode: (metadata as { exitCode: number }).exitCode };
      };
      expect(pick(call.json.structuredContent as Record<string, unknown>)).toEqual(
        pick(sdk.structuredContent as Record<string, unknown>),
      );
    } finally {
      await s.close();
    }
  });
});
