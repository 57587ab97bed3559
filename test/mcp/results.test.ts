/**
 * MCP tool results through the ordinary pipeline, against a real server
 * written with the SDK and spawned over stdio: registration, large text
 * (truncated preview, exact artifact, paged read-back), images, isError
 * results, argument validation and approval.
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { PreparedOperation } from '../../engine/index.js';
import { bigDigest, cleanup, finish, openEngine, openMcpEngine, RAW_SERVER, serverStats } from '../support/mcp.js';

afterEach(cleanup);

const MB = 1_000_000;
const HINT = /\[Truncated: [^\]]*\. Read more: read\(filePath="artifact:\/\/([0-9a-f]{64})", offset=(\d+)\)\]/;

describe('MCP tool registration', () => {
  it('registers each server tool as <server>.<tool> with the server description and JSON schema', async () => {
    const env = await openMcpEngine();
    const names = env.tools.map((t) => t.name).sort();
    expect(names).toEqual(
      [
        'fx.big',
        'fx.die',
        'fx.echo',
        'fx.fail',
        'fx.image',
        'fx.media',
        'fx.progress',
        'fx.shout',
        'fx.slow',
        'fx.stats',
      ].sort(),
    );
    const echo = env.tools.find((t) => t.name === 'fx.echo');
    expect(echo?.description).toBe('Echoes text');
    expect(echo?.source).toBe('mcp');
    expect(echo?.output).toEqual({ kind: 'single' });
    // Neither adapter can opt out of retention and truncation.
    expect(env.tools.every((t) => t.selfPaginating === false)).toBe(true);
    expect(echo?.argsSchema).toMatchObject({
      type: 'object',
      properties: { text: { type: 'string' }, times: { type: 'integer', minimum: 1, maximum: 100 } },
      required: ['text'],
    });
    expect(env.engine.tools().filter((t) => t.source === 'mcp')).toHaveLength(10);
    // A mixed-case server name for a tool is lower-cased; the server still receives its own name.
    const r = await env.engine.run('fx.shout', { text: 'quiet' });
    expect(r.model).toBe('QUIET');
    await finish(env);
  });
});

describe('MCP results', () => {
  it('1 MB of text: bounded preview with a hint, an artifact of exactly those bytes, read back through read', async () => {
    const env = await openMcpEngine();
    const { engine } = env;
    const r = await engine.run('fx.big', { bytes: MB });
    expect(r.status).toBe('success');
    expect(r.complete).toBe(true);
    const out = r.output;
    if (out?.kind !== 'single') throw new Error(`expected single output, got ${out?.kind}`);
    expect(out.bytes).toBe(MB);
    expect(out.lines).toBe(MB / 64);
    expect(out.truncated).toBe(true);
    // The artifact holds exactly the server's text.
    expect(out.digest).toBe(bigDigest(MB));
    // The model sees a bounded preview and a hint to the full output.
    expect(Buffer.byteLength(r.model)).toBeLessThanOrEqual(engine.options.toolOutput.maxBytes + 512);
    const hint = HINT.exec(r.model);
    expect(hint?.[1]).toBe(out.digest);
    // Follow the hint page by page through the public read path, hashing as we go.
    const hash = createHash('sha256');
    const shown = r.model.slice(0, r.model.indexOf('\n[Truncated'));
    const offset = Number(hint?.[2]);
    const lines = shown.split('\n').slice(0, offset);
    for (const l of lines) hash.update(`${l}\n`);
    let next: number | null = offset;
    let pages = 0;
    while (next !== null) {
      const page = await engine.read(`artifact://${out.digest}`, { offset: next, limit: 2000 });
      hash.update(page.content);
      next = page.nextOffset;
      pages++;
    }
    expect(pages).toBeGreaterThan(1);
    expect(hash.digest('hex')).toBe(out.digest);
    await finish(env);
  });

  it('an image result becomes an attachment with its media type and base64 data; its text is the output', async () => {
    const env = await openMcpEngine();
    const r = await env.engine.run('fx.image', {});
    expect(r.status).toBe('success');
    expect(r.model).toBe('a single red pixel');
    expect(r.attachments).toHaveLength(1);
    const [a] = r.attachments;
    expect(a?.mediaType).toBe('image/png');
    const png = Buffer.from(a?.data ?? '', 'base64');
    expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
    expect(r.display).toContain('image/png');
    await finish(env);
  });

  it('an isError result is a failed call whose text is the captured output and whose note is its message', async () => {
    const env = await openMcpEngine();
    const r = await env.engine.run('fx.fail', {});
    expect(r.status).toBe('failed');
    // The tool answered: its (error) output is complete, and no sluice error code applies.
    expect(r.complete).toBe(true);
    expect(r.error).toBeUndefined();
    expect(r.model).toBe(
      'disk quota exceeded on /data\nretry later\n\n[Status: failed. disk quota exceeded on /data.]',
    );
    if (r.output?.kind !== 'single') throw new Error('expected single output');
    expect(r.output.bytes).toBe(Buffer.byteLength('disk quota exceeded on /data\nretry later'));
    await finish(env);
  });

  it('progress notifications become live display, never output', async () => {
    const env = await openMcpEngine();
    const h = env.engine.call('fx.progress', {});
    const r = await h.result;
    expect(r.status).toBe('success');
    expect(r.model).toBe('done');
    expect(h.liveDisplay).toBe('1/2 first half\n2/2 second half\n');
    await finish(env);
  });

  it('progress that arrives in the same read as the result still reaches the display', async () => {
    // Regression: the SDK handles a response synchronously and a notification a microtask later, dropping the
    // call's progress handler in between; the transport now hands messages over one microtask apart.
    const env = await openEngine();
    await env.engine.addMcpServer({ name: 'raw', command: process.execPath, args: [RAW_SERVER, env.marker] });
    const h = env.engine.call('raw.burst', {});
    const r = await h.result;
    expect(r.model).toBe('burst done');
    expect(h.liveDisplay).toBe('1/2 one\n2/2 two\n');
    // A JSON-RPC error answer (not an isError result) fails the call with ETOOLFAILED and the server's message.
    const refused = await env.engine.run('raw.refuse', {});
    expect(refused.status).toBe('failed');
    expect(refused.error?.code).toBe('ETOOLFAILED');
    expect(refused.error?.message).toContain('backend unavailable');
    await finish(env);
  });
});

describe('MCP arguments and approval', () => {
  it("arguments are checked against the server's schema in the worker, before approval: EBADARGS names the field", async () => {
    const seen: PreparedOperation[] = [];
    const env = await openMcpEngine({
      approve: (op) => {
        seen.push(op);
        return true;
      },
    });
    const r = await env.engine.run('fx.echo', { text: 5, times: 0 });
    expect(r.status).toBe('failed');
    expect(r.error?.code).toBe('EBADARGS');
    expect(r.error?.message).toContain('text');
    expect(r.error?.message).toContain('times');
    expect(seen.filter((op) => op.kind === 'mcp.call')).toEqual([]);
    // Not an object at all.
    const r2 = await env.engine.run('fx.echo', 'hello');
    expect(r2.error?.code).toBe('EBADARGS');
    // Fields the schema does not forbid pass through to the server untouched.
    const ok = await env.engine.run('fx.echo', { text: 'ab', times: 2, extra: true });
    expect(ok.model).toBe('abab');
    expect((await serverStats(env.engine)).calls).toBe(1);
    await finish(env);
  });

  it('the approval policy sees { kind: mcp.call, server, tool, arguments }; a denial is EDENIED and the server is never called', async () => {
    const seen: PreparedOperation[] = [];
    const env = await openMcpEngine({
      approve: (op) => {
        seen.push(op);
        return !(op.kind === 'mcp.call' && op.tool === 'echo');
      },
    });
    const r = await env.engine.run('fx.echo', { text: 'secret' });
    expect(r.status).toBe('failed');
    expect(r.error?.code).toBe('EDENIED');
    expect(seen).toContainEqual({ kind: 'mcp.call', server: 'fx', tool: 'echo', arguments: { text: 'secret' } });
    const stats = await serverStats(env.engine);
    expect(stats.calls).toBe(0);
    await finish(env);
  });
});
