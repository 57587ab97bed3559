/**
 * `sluice mcp` as a real process, driven by the official SDK's Client over
 * stdio: the tools it lists, bounded results whose read hints the same
 * server's read tool follows, progress, cancellation that leaves no process
 * and a recorded result, failures kept as output, typed protocol errors, and
 * artifacts still readable after a restart.
 */
import { join } from 'node:path';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import { DEFAULT_MAX_MODEL_BYTES } from '../../engine/presentation/options.js';
import { waitNoProcess } from '../support/mcp.js';
import {
  connectStdio,
  pidsWith,
  readHint,
  removeDirs,
  type StdioSession,
  tempDir,
  textOf,
} from '../support/mcp-client.js';

afterAll(removeDirs);

async function rejection(p: Promise<unknown>): Promise<McpError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(McpError);
  return err as McpError;
}

describe('sluice mcp over stdio, with the SDK client', () => {
  // One server for the tests that need nothing of their own: each start costs an engine and a process.
  let s: StdioSession;
  beforeAll(async () => {
    s = await connectStdio(await tempDir(), ['--session', 'shared-run']);
  });
  afterAll(() => s.close());
  it('lists bash, read and grep with their schemas and the result schema', async () => {
    const { tools } = await s.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['bash', 'read', 'grep']);
    const bash = tools.find((t) => t.name === 'bash');
    expect(bash?.inputSchema.type).toBe('object');
    expect(Object.keys(bash?.inputSchema.properties ?? {})).toContain('command');
    // Derived from the wire schema of the terminal result (server/mcp/result.ts), in draft-07 for the SDK's Ajv;
    // the SDK client checks every structuredContent below against it.
    expect(bash?.outputSchema).not.toHaveProperty('$schema');
    expect([...((bash?.outputSchema?.required as string[]) ?? [])].sort()).toEqual(
      ['callId', 'complete', 'durationMs', 'metadata', 'output', 'status', 'tool'].sort(),
    );
    expect(Object.keys(bash?.outputSchema?.properties ?? {}).sort()).toEqual(
      ['callId', 'complete', 'durationMs', 'error', 'metadata', 'output', 'session', 'status', 'tool'].sort(),
    );
    expect(tools.find((t) => t.name === 'read')?.annotations?.readOnlyHint).toBe(true);
  });

  it('bounds seq 1 100000 under the model-view bound, and its hint reads on at the right line', async () => {
    const r = await s.client.callTool({ name: 'bash', arguments: { command: 'seq 1 100000' } });
    const text = textOf(r);
    expect(r.isError).toBeUndefined();
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(DEFAULT_MAX_MODEL_BYTES);
    expect(text.startsWith('[stdout]\n1\n2\n')).toBe(true);
    expect(text).toContain('100000\n');
    const sc = r.structuredContent as {
      status: string;
      session: string;
      output: { streams: Array<{ name: string; lines: number; truncated: boolean; uri: string }> };
    };
    expect(sc.status).toBe('success');
    expect(sc.session).toBe('shared-run');
    const stdout = sc.output.streams.find((x) => x.name === 'stdout');
    expect(stdout).toMatchObject({ lines: 100000, truncated: true });
    const hint = readHint(text);
    expect(hint.filePath).toBe(stdout?.uri);
    const page = await s.client.callTool({ name: 'read', arguments: hint });
    const lines = textOf(page).split('\n');
    expect(lines[0]).toBe(String(hint.offset + 1));
    expect(lines[1]).toBe(String(hint.offset + 2));
  });

  it('sends progress to a client that gave a progress token, while output flows and while it is silent', async () => {
    const seen: Array<{ progress: number; message?: string }> = [];
    const r = await s.client.callTool(
      { name: 'bash', arguments: { command: 'echo one; sleep 1.3; echo two' } },
      undefined,
      { onprogress: (p) => seen.push(p) },
    );
    expect(textOf(r)).toContain('one\ntwo\n');
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < seen.length; i++) {
      expect(seen[i]?.progress).toBeGreaterThan(seen[i - 1]?.progress as number);
    }
    expect(seen.some((p) => /stdout 1 lines 4 B/.test(p.message ?? ''))).toBe(true);
  });

  it('cancels a sleep 60 when the client cancels: no process left, the cancelled result recorded', async () => {
    const dir = await tempDir();
    const marker = `60.${process.pid}${Date.now() % 100000}`;
    const s = await connectStdio(dir, ['--session', 'cancel-run']);
    const ac = new AbortController();
    const call = s.client.callTool({ name: 'bash', arguments: { command: `sleep ${marker}` } }, undefined, {
      signal: ac.signal,
    });
    try {
      const until = Date.now() + 10_000;
      while (pidsWith(`sleep ${marker}`).length === 0 && Date.now() < until)
        await new Promise((r) => setTimeout(r, 20));
      expect(pidsWith(`sleep ${marker}`).length).toBe(1);
      ac.abort('the user pressed Esc');
      await expect(call).rejects.toThrow();
      expect(await waitNoProcess(`sleep ${marker}`, 10_000)).toEqual([]);
      // The connection goes on serving.
      const next = await s.client.callTool({ name: 'bash', arguments: { command: 'echo after' } });
      expect(textOf(next)).toContain('after');
    } finally {
      await s.close();
    }
    const engine = await Engine.open({ store: join(dir, 'store'), cwd: dir });
    try {
      const replay = await engine.replay('cancel-run');
      expect(replay.calls.map((c) => c.result.status)).toEqual(['cancelled', 'success']);
      expect(replay.calls[0]?.result.error?.code).toBe('ECANCELLED');
    } finally {
      await engine.close();
    }
  });

  it('a failing command is isError with its stdout, stderr and exit code kept', async () => {
    const r = await s.client.callTool({ name: 'bash', arguments: { command: 'echo kept; echo why >&2; exit 3' } });
    expect(r.isError).toBe(true);
    expect(textOf(r)).toContain('kept\n');
    expect(textOf(r)).toContain('why\n');
    expect(r.structuredContent).toMatchObject({ status: 'failed', metadata: { exitCode: 3 } });
  });

  it('an unknown tool and arguments failing the schema are InvalidParams with the sluice code', async () => {
    const unknown = await rejection(s.client.callTool({ name: 'bsah', arguments: {} }));
    expect(unknown.code).toBe(ErrorCode.InvalidParams);
    expect(unknown.data).toMatchObject({ code: 'EUNKNOWNTOOL' });
    const bad = await rejection(s.client.callTool({ name: 'bash', arguments: { command: 42 } }));
    expect(bad.code).toBe(ErrorCode.InvalidParams);
    expect(bad.data).toMatchObject({ code: 'EBADARGS' });
    const missing = await rejection(s.client.callTool({ name: 'read', arguments: {} }));
    expect(missing.data).toMatchObject({ code: 'EBADARGS' });
  });

  it('reads an artifact of an earlier run after the server restarts, as a tool and as a resource', async () => {
    const dir = await tempDir();
    const first = await connectStdio(dir);
    let uri: string;
    try {
      const r = await first.client.callTool({ name: 'bash', arguments: { command: 'seq 1 5000' } });
      uri = readHint(textOf(r)).filePath;
    } finally {
      await first.close();
    }
    const second = await connectStdio(dir);
    try {
      const page = await second.client.callTool({ name: 'read', arguments: { filePath: uri, offset: 4997 } });
      expect(textOf(page).startsWith('4998\n4999\n5000\n')).toBe(true);
      const res = await second.client.readResource({ uri: `${uri}?offset=4000&limit=10` });
      const c = res.contents[0] as unknown as { text: string; _meta: { next: string; totalLines: number } };
      expect(c.text.split('\n')[0]).toBe('4001');
      expect(c._meta.totalLines).toBe(5000);
      expect(c._meta.next).toBe(`${uri}?offset=4010&limit=10`);
      const { resourceTemplates } = await second.client.listResourceTemplates();
      expect(resourceTemplates.map((t) => t.uriTemplate)).toContain(
        'artifact://{digest}/{stream}{?offset,limit,byteOffset}',
      );
      const missing = await rejection(second.client.readResource({ uri: `artifact://${'0'.repeat(64)}` }));
      expect(missing.code).toBe(-32002);
    } finally {
      await second.close();
    }
  });
});
