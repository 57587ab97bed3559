/**
 * Plugin tool modules registered by the embedding application: custom named
 * streams through the ordinary pipeline, every rejection at registration
 * (typed, naming the module and the reason), the same tool context as the
 * built-ins and no more, and approval of their prepared operations.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { PreparedOperation } from '../../engine/index.js';
import { cleanup, finish, openEngine, plugin } from '../support/mcp.js';

afterEach(cleanup);

describe('a streaming plugin with its own stream names', () => {
  it('publishes results and diagnostics in declaration order, with display kept out of both', async () => {
    const env = await openEngine();
    const { engine } = env;
    const info = await engine.register(plugin('results-diagnostics'));
    expect(info).toMatchObject({
      name: 'plugin.search',
      source: 'plugin',
      selfPaginating: false,
      output: { kind: 'streams', streams: ['results', 'diagnostics'] },
    });
    const items = 5000;
    const h = engine.call('plugin.search', { items });
    const r = await h.result;
    expect(r.status).toBe('success');
    expect(r.display).toBe(`${items} results`);
    expect(h.liveDisplay).toContain('searched 4900\n');
    const out = r.output;
    if (out?.kind !== 'streams') throw new Error(`expected named streams, got ${out?.kind}`);
    expect(out.streams.map((s) => s.name)).toEqual(['results', 'diagnostics']);
    // The generic manifest lists the streams in declaration order, not write order.
    const manifest = JSON.parse((await engine.read(`artifact://${out.manifest}`)).content) as {
      streams: Array<{ name: string; digest: string }>;
    };
    expect(manifest.streams.map((s) => s.name)).toEqual(['results', 'diagnostics']);
    // Each stream reads back through its public URI, beyond the preview.
    const results = out.streams[0];
    expect(results?.lines).toBe(items);
    expect(results?.truncated).toBe(true);
    const last = await engine.read(`artifact://${out.manifest}/results`, { offset: items - 1, limit: 1 });
    expect(last.content).toBe(`result ${items - 1}\n`);
    const diagnostics = await engine.read(`artifact://${out.manifest}/diagnostics`);
    expect(diagnostics.content.startsWith('scan started\nprogress 0\n')).toBe(true);
    expect(diagnostics.content.endsWith('progress 4900\nscan finished\n')).toBe(true);
    expect(diagnostics.content).not.toContain('searched');
    // The model view renders both, in order, each with its own heading.
    expect(r.model.indexOf('[results]')).toBe(0);
    expect(r.model.indexOf('[diagnostics]')).toBeGreaterThan(0);
    expect(r.model).toContain(`read(filePath="artifact://${out.manifest}/results", offset=`);
    await finish(env);
  });
});

describe('rejections at registration', () => {
  const cases: Array<[string, string, string]> = [
    ['a module whose import throws', 'import-fails', 'plugin configuration missing: PLUGIN_TOKEN'],
    ['a module that does not exist', 'does-not-exist', 'failed to import'],
    ['a module that exports no tool', 'no-tool', 'exports no tool'],
    ['a traversal stream name', 'invalid-streams', '".."'],
    ['duplicate streams in a hand-made declaration', 'forged-streams', '"out"'],
    ['a plugin claiming to be self-paginating', 'self-paginating', 'selfPaginating'],
  ];
  const codes: Record<string, string> = {
    'import-fails': 'EBADMODULE',
    'does-not-exist': 'EBADMODULE',
    'no-tool': 'EBADMODULE',
    'invalid-streams': 'EBADDECL',
    'forged-streams': 'EBADDECL',
    'self-paginating': 'EBADMODULE',
  };

  it.each(cases)('%s is rejected with a typed error naming the module and the reason', async (_label, name, reason) => {
    const env = await openEngine();
    const before = env.engine.tools().map((t) => t.name);
    const path = plugin(name);
    const err = await env.engine.register(path).catch((e: unknown) => e);
    expect((err as { code?: string }).code).toBe(codes[name]);
    expect((err as Error).message).toContain(path);
    expect((err as Error).message).toContain(reason);
    expect(env.engine.tools().map((t) => t.name)).toEqual(before);
    // The engine goes on serving.
    expect((await env.engine.run('bash', { command: 'echo fine' })).status).toBe('success');
    await finish(env);
  });
});

describe('the tool context', () => {
  it('a plugin gets exactly the context built-ins get: streams, display, signal, cwd, host, artifacts, process tracking', async () => {
    const env = await openEngine();
    await env.engine.register(plugin('context-probe'));
    const r = await env.engine.run('plugin.probe', {});
    expect(r.status).toBe('success');
    const seen = JSON.parse(r.model);
    expect(seen.shape).toEqual({
      artifacts: 'object',
      callId: 'string',
      cwd: 'string',
      display: 'function',
      // Host services: approve() runs on the main thread, through comlink loaded on its first use.
      host: 'object',
      // No sandbox on this engine; sandboxed() then returns the command unchanged.
      sandbox: 'undefined',
      sandboxed: 'function',
      signal: 'object',
      stream: 'function',
      trackProcessGroup: 'function',
    });
    expect(seen.cwd).toBe(env.dir);
    expect(seen.aborted).toBe(false);
    expect(seen.hostApprove).toBe('function');
    expect(seen.artifactsReadPage).toBe('function');
    await finish(env);
  });
});

describe('approval', () => {
  it("a denied prepared operation fails the call with EDENIED and the plugin's run never happens", async () => {
    const seen: PreparedOperation[] = [];
    const env = await openEngine({
      approve: (op) => {
        seen.push(op);
        return op.kind !== 'plugin.write';
      },
    });
    await env.engine.register(plugin('writes-file'));
    const r = await env.engine.run('plugin.write', { file: 'note.txt', text: 'hello' });
    expect(r.status).toBe('failed');
    expect(r.error?.code).toBe('EDENIED');
    expect(seen).toEqual([{ kind: 'plugin.write', path: join(env.dir, 'note.txt'), bytes: 5 }]);
    expect(existsSync(join(env.dir, 'note.txt'))).toBe(false);
    await finish(env);
  });

  it('an approved operation runs', async () => {
    const env = await openEngine({ approve: () => true });
    await env.engine.register(plugin('writes-file'));
    const r = await env.engine.run('plugin.write', { file: 'note.txt', text: 'hello' });
    expect(r.status).toBe('success');
    expect(r.model).toBe('wrote note.txt');
    expect(existsSync(join(env.dir, 'note.txt'))).toBe(true);
    await finish(env);
  });
});
