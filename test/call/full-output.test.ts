/**
 * A full (non-streaming) completion supplies text or bytes per stream:
 * strings are stored as UTF-8, Buffers and Uint8Arrays exactly as given.
 * Anything else fails the call with EBADOUTPUT naming the stream, and
 * nothing of the full output is published as success.
 *
 * Values that are not strings must not be skipped silently: otherwise
 * `complete.full({ results: Buffer.from('x\n') })` would end `success,
 * complete` with `results` empty.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { closeEngines, engineWith, expectStoreClean, readBlob, sha256 } from '../support/engines.js';

afterEach(closeEngines);

const WRONG = ['number', 'null', 'array', 'object', 'boolean', 'undefined'] as const;

describe('full output takes text or bytes', () => {
  it('a Buffer and a string for named streams are both published, the bytes exactly', async () => {
    const { engine } = await engineWith(['script-streams']);
    const r = await engine.run('script-streams', {
      fullTyped: { results: { kind: 'buffer', text: 'x\n' }, diagnostics: { kind: 'string', text: 'd\n' } },
    });
    expect(r).toMatchObject({ status: 'success', complete: true });
    if (r.output?.kind !== 'streams') throw new Error('expected streams');
    expect(r.output.streams.map((s) => [s.name, s.bytes, s.digest])).toEqual([
      ['results', 2, sha256('x\n')],
      ['diagnostics', 2, sha256('d\n')],
    ]);
    await expectStoreClean(engine);
  });

  it('single output takes a Buffer, a Uint8Array or a string, with the same digest for the same bytes', async () => {
    const { engine } = await engineWith(['script-single']);
    for (const kind of ['buffer', 'uint8array', 'string'] as const) {
      const r = await engine.run('script-single', { fullTyped: { kind, text: 'héllo\n' } });
      expect(r).toMatchObject({ status: 'success', output: { kind: 'single', bytes: 7, digest: sha256('héllo\n') } });
    }
    await expectStoreClean(engine);
  });

  it('bytes that are not UTF-8 are stored as given, for a Buffer and a Uint8Array', async () => {
    const { engine } = await engineWith(['script-single']);
    // 'é' in Latin-1 (e9), a stray continuation byte (80), a truncated sequence at the end (e2 82).
    const hex = '61e90a80e282';
    for (const kind of ['buffer', 'uint8array'] as const) {
      const r = await engine.run('script-single', { fullTyped: { kind, hex } });
      const expected = Buffer.from(hex, 'hex');
      expect(r.output).toMatchObject({ kind: 'single', bytes: 6, lines: 2, digest: sha256(expected) });
      expect(await readBlob(engine, sha256(expected))).toEqual(expected);
    }
    await expectStoreClean(engine);
  });

  for (const kind of WRONG) {
    it(`a ${kind} for a named stream fails with EBADOUTPUT naming the stream, publishing nothing`, async () => {
      const { engine } = await engineWith(['script-streams']);
      const r = await engine.run('script-streams', {
        fullTyped: { results: { kind }, diagnostics: { kind: 'string', text: 'd\n' } },
      });
      expect(r).toMatchObject({ status: 'failed', complete: false, output: null });
      expect(r.error).toMatchObject({ code: 'EBADOUTPUT', details: { stream: 'results' } });
      expect(r.error?.message).toContain('"results"');
      await expectStoreClean(engine);
    });
  }

  for (const kind of WRONG) {
    it(`a ${kind} as single output fails with EBADOUTPUT, publishing nothing`, async () => {
      const { engine } = await engineWith(['script-single']);
      const r = await engine.run('script-single', { fullTyped: { kind } });
      expect(r).toMatchObject({ status: 'failed', complete: false, output: null });
      expect(r.error).toMatchObject({ code: 'EBADOUTPUT', details: { stream: null } });
      await expectStoreClean(engine);
    });
  }

  it('a full output for named streams that is not a map of them fails with EBADOUTPUT', async () => {
    const { engine } = await engineWith(['script-streams']);
    const r = await engine.run('script-streams', { fullTyped: { kind: 'buffer', text: 'x' } });
    expect(r).toMatchObject({ status: 'failed', output: null, error: { code: 'EBADOUTPUT' } });
    await expectStoreClean(engine);
  });

  it('what was streamed before a bad full output is kept as incomplete output', async () => {
    const { engine } = await engineWith(['script-single']);
    // Streaming then supplying full output is EMIXEDMODE whatever the value: the mode check comes first.
    const r = await engine.run('script-single', {
      steps: [{ text: 'streamed\n' }],
      fullTyped: { kind: 'number' },
    });
    expect(r).toMatchObject({ status: 'failed', error: { code: 'EMIXEDMODE' } });
    if (r.output?.kind !== 'single') throw new Error('expected single output');
    expect(await readBlob(engine, r.output.digest)).toEqual(Buffer.from('streamed\n'));
    await expectStoreClean(engine);
  });
});
