/**
 * The delta and completion contract: interleaved deltas across streams,
 * display text kept out of the streams, streamed completion without
 * duplication, full (non-streaming) completion through the same capture,
 * mixed modes and undeclared streams rejected with typed errors.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  closeEngines,
  engineWith,
  expectPublished,
  expectStoreClean,
  readBlob,
  sha256,
  singleText,
  streamBytes,
} from '../support/engines.js';

afterEach(closeEngines);

describe('deltas', () => {
  it('interleaved deltas across streams keep per-stream order and land in their own stream', async () => {
    const { engine } = await engineWith(['script-streams']);
    const steps = [];
    const expected = { results: '', diagnostics: '' };
    for (let i = 0; i < 40; i++) {
      const stream = i % 3 === 0 ? 'diagnostics' : 'results';
      const text = `${stream[0]}${i}\n`;
      expected[stream] += text;
      steps.push({ stream, text, ...(i % 7 === 0 ? { sleepMs: 2 } : {}) });
    }
    const r = await engine.run('script-streams', { steps });
    expect(r.status).toBe('success');
    expect(await streamBytes(engine, r)).toEqual(expected);
    await expectPublished(engine, r.output);
  });

  it('display text never enters a stream: blob bytes are exactly the stream writes', async () => {
    const { engine } = await engineWith(['script-streams', 'script-single']);
    const r = await engine.run('script-streams', {
      steps: [
        { display: 'DISPLAY-ONLY-1 ' },
        { stream: 'results', text: 'r1\n', display: 'DISPLAY-ONLY-2 ' },
        { stream: 'diagnostics', text: 'd1\n', display: 'DISPLAY-ONLY-3' },
      ],
    });
    expect(await streamBytes(engine, r)).toEqual({ results: 'r1\n', diagnostics: 'd1\n' });
    expect(r.model).not.toContain('DISPLAY-ONLY');
    const single = await engine.run('script-single', { steps: [{ text: 'out', display: 'DISPLAY-ONLY' }] });
    expect(await singleText(engine, single)).toBe('out');
    expect(single.output).toMatchObject({ digest: sha256('out'), bytes: 3 });
    expect(single.model).toBe('out');
  });

  it('a single-output tool calling ctx.stream(name) fails with EUNDECLAREDSTREAM, keeping what it wrote before', async () => {
    const { engine } = await engineWith(['script-single']);
    const r = await engine.run('script-single', { steps: [{ text: 'before\n' }, { stream: 'stdout', text: 'x' }] });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EUNDECLAREDSTREAM' } });
    expect(await singleText(engine, r)).toBe('before\n');
    await expectStoreClean(engine);
  });

  it('a chunk for an undeclared stream fails the call even when the tool catches the error', async () => {
    const { engine } = await engineWith(['script-streams']);
    const r = await engine.run('script-streams', {
      steps: [
        { stream: 'results', text: 'kept\n' },
        { stream: 'stdout', text: 'lost', catchError: true },
        { stream: 'results', text: 'after\n' },
      ],
    });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EUNDECLAREDSTREAM' } });
    expect(r.error?.message).toContain('stdout');
    const streams = await streamBytes(engine, r);
    expect(streams.results).toBe('kept\nafter\n');
    expect(Object.values(streams).join('')).not.toContain('lost');
    await expectStoreClean(engine);
  });

  it('a named-stream tool calling ctx.stream() without a name fails with EUNDECLAREDSTREAM', async () => {
    const { engine } = await engineWith(['script-streams']);
    const r = await engine.run('script-streams', { steps: [{ text: 'unnamed' }] });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EUNDECLAREDSTREAM' } });
  });
});

describe('completion modes', () => {
  it('a streamed completion publishes exactly what was written, once', async () => {
    const { engine } = await engineWith(['script-single']);
    const parts = ['alpha\n', 'beta\n', 'gamma'];
    const r = await engine.run('script-single', {
      steps: parts.map((text) => ({ text })),
      finalDisplay: 'three parts',
    });
    expect(r).toMatchObject({ status: 'success', complete: true, display: 'three parts' });
    const all = parts.join('');
    expect(r.output).toMatchObject({ kind: 'single', digest: sha256(all), bytes: Buffer.byteLength(all), lines: 3 });
    expect((await readBlob(engine, sha256(all))).toString()).toBe(all);
  });

  it('a full completion with single output is captured through the same pipeline', async () => {
    const { engine } = await engineWith(['script-single']);
    const text = 'line 1\nline 2\n'.repeat(1000);
    const r = await engine.run('script-single', { full: text, finalDisplay: 'done' });
    expect(r).toMatchObject({ status: 'success', complete: true, display: 'done' });
    expect(r.output).toMatchObject({ kind: 'single', digest: sha256(text), bytes: text.length, lines: 2000 });
    await expectPublished(engine, r.output);
    await expectStoreClean(engine);
  });

  it('a full completion with named outputs publishes each stream, missing ones empty, in declaration order', async () => {
    const { engine } = await engineWith(['script-order']);
    const r = await engine.run('script-order', { full: { alpha: 'A\n', zeta: 'Z1\nZ2\n' } });
    expect(r).toMatchObject({ status: 'success', complete: true });
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    expect(r.output.streams.map((s) => [s.name, s.digest, s.lines])).toEqual([
      ['zeta', sha256('Z1\nZ2\n'), 2],
      ['alpha', sha256('A\n'), 1],
      ['Mid.dle_2-x', sha256(''), 0],
    ]);
    await expectPublished(engine, r.output);
  });

  it('a full completion naming an undeclared stream fails with EUNDECLAREDSTREAM and publishes none of it', async () => {
    const { engine } = await engineWith(['script-streams']);
    const r = await engine.run('script-streams', { full: { results: 'r\n', bogus: 'b\n' } });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EUNDECLAREDSTREAM' } });
    // Nothing was accepted, so nothing is published (not even empty streams).
    expect(r.output).toBeNull();
    expect(r.model).toMatch(/^\[Status: failed\. EUNDECLAREDSTREAM: /);
    await expectStoreClean(engine);
  });

  it('streaming and then supplying full output fails with EMIXEDMODE and publishes nothing of the full output', async () => {
    const { engine } = await engineWith(['script-single', 'script-streams']);
    const single = await engine.run('script-single', { steps: [{ text: 'streamed\n' }], full: 'FULL-OUTPUT\n' });
    expect(single).toMatchObject({ status: 'failed', complete: false, error: { code: 'EMIXEDMODE' } });
    expect(await singleText(engine, single)).toBe('streamed\n');
    expect(single.model).not.toContain('FULL-OUTPUT');

    const named = await engine.run('script-streams', {
      steps: [{ stream: 'diagnostics', text: 'streamed\n' }],
      full: { results: 'FULL-RESULTS\n', diagnostics: 'FULL-DIAG\n' },
    });
    expect(named).toMatchObject({ status: 'failed', complete: false, error: { code: 'EMIXEDMODE' } });
    expect(await streamBytes(engine, named)).toEqual({ results: '', diagnostics: 'streamed\n' });
    await expectStoreClean(engine);
  });

  it('streaming a buffer given away with handOver and then supplying full output is EMIXEDMODE too', async () => {
    const { engine } = await engineWith(['script-single']);
    // The moved buffer is empty once posted: what was streamed is counted before it moves.
    const r = await engine.run('script-single', { steps: [{ handOverBytes: 40_000 }], full: 'FULL' });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EMIXEDMODE' } });
    expect(await singleText(engine, r)).toBe('h'.repeat(40_000));
    await expectStoreClean(engine);
  });

  it('a tool-reported failure is failed but complete, with its note, metadata and display', async () => {
    const { engine } = await engineWith(['script-single']);
    const r = await engine.run('script-single', {
      steps: [{ text: 'partial results\n' }],
      status: 'failed',
      note: 'exit code 7',
      metadata: { exitCode: 7 },
      finalDisplay: 'it failed',
    });
    expect(r).toMatchObject({ status: 'failed', complete: true, metadata: { exitCode: 7 }, display: 'it failed' });
    expect(r.error).toBeUndefined();
    expect(r.model).toBe('partial results\n\n[Status: failed. exit code 7.]');
  });

  it('a tool that throws fails with ETOOLFAILED and its accepted output published as incomplete', async () => {
    const { engine } = await engineWith(['script-streams']);
    const r = await engine.run('script-streams', {
      steps: [{ stream: 'results', text: 'got this far\n' }],
      throwMessage: 'kaboom',
    });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'ETOOLFAILED' } });
    expect(r.error?.message).toContain('kaboom');
    expect(await streamBytes(engine, r)).toEqual({ results: 'got this far\n', diagnostics: '' });
    expect(r.model).toContain('Output is incomplete.');
    await expectStoreClean(engine);
  });

  it('a completion with an error ends the call failed with that error, even if it also says success', async () => {
    const { engine } = await engineWith(['script-single']);
    const error = { code: 'ETIMEOUT', message: 'gave up after 5 s' };
    const failed = await engine.run('script-single', { steps: [{ text: 'partial\n' }], error });
    expect(failed).toMatchObject({ status: 'failed', complete: false, error });
    expect(await singleText(engine, failed)).toBe('partial\n');
    // The error wins over a contradictory status: the tool's typed error is what the host sees.
    const both = await engine.run('script-single', { steps: [{ text: 'partial\n' }], error, status: 'success' });
    expect(both).toMatchObject({ status: 'failed', complete: false, error });
    expect(await singleText(engine, both)).toBe('partial\n');
    await expectStoreClean(engine);
  });
});

describe('completion bounds', () => {
  it('a final display larger than liveDisplayBytes is kept bounded: its beginning and a cut marker', async () => {
    const { engine } = await engineWith(['script-single'], { liveDisplayBytes: 4096 });
    const r = await engine.run('script-single', { steps: [{ text: 'out\n' }], finalDisplay: 'd'.repeat(100_000) });
    expect(r.status).toBe('success');
    expect(Buffer.byteLength(r.display)).toBeLessThanOrEqual(4096);
    expect(r.display.startsWith('d'.repeat(1000))).toBe(true);
    expect(r.display).toMatch(
      /… \[\d+ more bytes cut; the whole text: read\(filePath="artifact:\/\/[0-9a-f]{64}"\)\]$/,
    );
  });

  it('metadata beyond the completion bound fails the call with ERESOURCELIMIT, output kept', async () => {
    const { engine } = await engineWith(['script-single']);
    const r = await engine.run('script-single', {
      steps: [{ text: 'kept\n' }],
      metadata: { blob: 'm'.repeat(1024 * 1024 + 10) },
    });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'ERESOURCELIMIT' } });
    expect(await singleText(engine, r)).toBe('kept\n');
    expect(r.metadata).toEqual({});
  });
});
