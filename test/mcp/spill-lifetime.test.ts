/**
 * The spill files of large MCP results (workers/mcp/spill.ts): they live in
 * the store's tmp/, and none survives its call, whether the call completed,
 * failed or was cancelled: no file in tmp/ and no descriptor of one left
 * open in this process (the host thread's descriptors are the process's).
 * Large structured content, images past the attachment bounds and
 * spilled images within them come back bounded and whole.
 */
import { createHash } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { COMPLETION_BOUNDS } from '../../engine/protocol/limits.js';
import {
  bigDigest,
  bigLine,
  cleanup,
  expectNoSpill,
  finish,
  heldSpillBytes,
  openEngine,
  openMcpEngine,
  openSpillFiles,
  RAW_SERVER,
  serverStats,
} from '../support/mcp.js';

afterEach(cleanup);

const MB = 1_000_000;

describe('spill files of large MCP results', () => {
  it('are gone after a completed, a failed and a cancelled call, and live in the store tmp/ meanwhile', async () => {
    const env = await openMcpEngine();
    const { engine } = env;

    const ok = await engine.run('fx.big', { bytes: 5 * MB });
    expect(ok.status).toBe('success');
    expect(ok.output?.kind === 'single' && ok.output.digest).toBe(bigDigest(5 * MB));
    await expectNoSpill(env);

    const failed = await engine.run('fx.big', { bytes: 5 * MB, isError: true });
    expect(failed.status).toBe('failed');
    expect(failed.output?.kind === 'single' && failed.output.digest).toBe(bigDigest(5 * MB));
    await expectNoSpill(env);

    // Cancelled while the upstream sends (or the worker copies) 60 MB: whichever it was, nothing stays.
    const h = engine.call('fx.big', { bytes: 60 * MB });
    let sawSpill = false;
    const watch = (async () => {
      while (!sawSpill) {
        if ((await openSpillFiles(env)).length > 0) sawSpill = true;
        else await new Promise((r) => setTimeout(r, 5));
      }
    })();
    await Promise.race([watch, new Promise((r) => setTimeout(r, 60_000))]);
    expect(sawSpill).toBe(true);
    h.cancel('stop');
    const cancelled = await h.result;
    sawSpill = true;
    expect(cancelled.status).toBe('cancelled');
    await expectNoSpill(env);

    // The connection is still the same server's.
    expect((await serverStats(engine)).calls).toBe(3);
    await finish(env);
  });

  it('are gone when the call ends with its worker terminated mid-copy: no file, no byte held', async () => {
    // One shared thread, so a tool that blocks it stops the copy and the thread can only be terminated.
    const env = await openMcpEngine({ threads: 1, graceMs: 100 });
    const { engine } = env;
    const here = dirname(fileURLToPath(import.meta.url));
    await engine.register(resolve(here, '..', 'fixtures', 'tools', 'shared-spin.mjs'));
    const h = engine.call('fx.big', { bytes: 100 * MB });
    // The worker copies once it holds a descriptor of its own beside the host's.
    const until = Date.now() + 60_000;
    while ((await openSpillFiles(env)).length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    expect((await openSpillFiles(env)).length).toBe(2);
    const spin = engine.call('shared-spin', {});
    await new Promise((r) => setTimeout(r, 300));
    expect(await heldSpillBytes(env)).toBeGreaterThan(100 * MB);
    h.cancel('stop');
    const cancelled = await h.result;
    expect(cancelled.status).toBe('cancelled');
    spin.cancel('stop');
    await spin.result;
    // The thread is terminated once it has not answered its abandon (pool.ts: at least 5 s).
    await expectNoSpill(env, 20_000);
    expect(await heldSpillBytes(env)).toBe(0);
    await finish(env);
  });

  it('leave nothing when the host thread dies with a spill claimed: the copy ends whole, a call in flight fails typed', async () => {
    const env = await openMcpEngine();
    const { engine } = env;
    const copying = engine.call('fx.big', { bytes: 100 * MB });
    const until = Date.now() + 60_000;
    while ((await openSpillFiles(env)).length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    expect((await openSpillFiles(env)).length).toBe(2);
    const waiting = engine.call('fx.slow', { ms: 30_000 });
    await new Promise((r) => setTimeout(r, 200));
    const internals = engine as unknown as { mcp: { host: { worker: { terminate(): Promise<number> } } } };
    await internals.mcp.host.worker.terminate();
    // The worker copies through its own descriptor: the host's death does not cut the result.
    const copied = await copying.result;
    expect([copied.status, copied.output?.kind === 'single' && copied.output.digest]).toEqual([
      'success',
      bigDigest(100 * MB),
    ]);
    const failed = await waiting.result;
    expect([failed.status, failed.error?.code]).toEqual(['failed', 'EWORKERCRASH']);
    await expectNoSpill(env);
    expect(await heldSpillBytes(env)).toBe(0);
    await finish(env);
  });

  it('bounds large structured content: a streamed artifact with a bounded preview', async () => {
    const env = await openMcpEngine();
    const { engine } = env;
    const r = await engine.run('fx.big', { bytes: 3 * MB, structured: true });
    expect(r.status).toBe('success');
    const out = r.output;
    if (out?.kind !== 'single') throw new Error(`expected single output, got ${out?.kind}`);
    // The raw JSON of { text }: the escaped text inside, 3 MB of it plus its escapes and the wrapper.
    expect(out.bytes).toBeGreaterThan(3 * MB);
    expect(out.truncated).toBe(true);
    expect(Buffer.byteLength(r.model)).toBeLessThanOrEqual(engine.options.toolOutput.maxBytes + 512);
    expect(r.model.startsWith('{"text":"00000000 abc')).toBe(true);
    await expectNoSpill(env);
    await finish(env);
  });

  it('attaches images within the bounds (spilled ones too) and writes the rest to the output with a note', async () => {
    const env = await openMcpEngine();
    const { engine } = env;
    // 20 images of 200 KB: each past the in-memory size, so every one was spilled.
    const r = await engine.run('fx.media', { count: 20, bytes: 200_000 });
    expect(r.error).toBeUndefined();
    expect(r.status).toBe('success');
    expect(r.attachments).toHaveLength(COMPLETION_BOUNDS.attachments);
    expect(r.attachments.every((a) => a.data.length === 200_000 && a.mediaType === 'image/png')).toBe(true);
    expect(r.attachments.map((a) => a.data[0]).join('')).toBe('ABCDEFGHIJKLMNOP');
    const out = r.output;
    if (out?.kind !== 'single') throw new Error(`expected single output, got ${out?.kind}`);
    const page = await engine.read(`artifact://${out.digest}`, { offset: 0, limit: 20 });
    const lines = page.content.split('\n');
    expect(lines[0]).toBe('20 images');
    expect(lines[1]).toBe(
      '[content 17: image/png, 200000 bytes of base64, not attached (past 16 attachments); its base64 is the next line]',
    );
    expect(
      createHash('sha256')
        .update(lines[2] as string)
        .digest('hex'),
    ).toBe(
      createHash('sha256')
        .update(`Q${'A'.repeat(199_999)}`)
        .digest('hex'),
    );
    expect(lines[7]?.startsWith('[content 20: image/png')).toBe(true);
    await expectNoSpill(env);
    await finish(env);
  });

  it('takes a result written as one message a piece at a time (as a 1 GiB one must be) exactly', async () => {
    const env = await openMcpEngine();
    await env.engine.addMcpServer({ name: 'raw', command: process.execPath, args: [RAW_SERVER, env.marker] });
    const r = await env.engine.run('raw.stream', { bytes: 30 * MB + 7 });
    expect(r.status).toBe('success');
    expect(r.output?.kind === 'single' && r.output.digest).toBe(bigDigest(30 * MB + 7));
    await expectNoSpill(env);
    await finish(env);
  });

  it('fails a call whose large response is not JSON with EPROTOCOL, and the connection goes on', async () => {
    const env = await openEngine();
    await env.engine.addMcpServer({ name: 'raw', command: process.execPath, args: [RAW_SERVER, env.marker] });
    const r = await env.engine.run('raw.garble', {});
    expect(r.status).toBe('failed');
    expect(r.error?.code).toBe('EPROTOCOL');
    await expectNoSpill(env);
    expect((await env.engine.run('raw.stream', { bytes: 100 })).model).toBe(
      bigLine(0).slice(0, 64) + bigLine(1).slice(0, 36),
    );
    await finish(env);
  });
});
