import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import { minModelViewBytes } from '../../engine/presentation/model-view.js';
import {
  DEFAULT_TOOL_OUTPUT_OPTIONS,
  MODEL_STATUS_RESERVE,
  minModelBytes,
  parseToolOutputOptions,
  toolOutputOptionsSchema,
} from '../../engine/presentation/options.js';

describe('toolOutput options', () => {
  it('defaults to 2000 lines, 51200 bytes per stream and a 256 KiB model view', () => {
    const expected = { maxLines: 2000, maxBytes: 51200, maxModelBytes: 262144, tailShare: 0.5 };
    expect(parseToolOutputOptions(undefined)).toEqual(expected);
    expect(parseToolOutputOptions({})).toEqual(expected);
    expect(DEFAULT_TOOL_OUTPUT_OPTIONS).toEqual(expected);
    expect(toolOutputOptionsSchema.parse({})).toEqual(expected);
  });

  it('fills in the options not given', () => {
    expect(parseToolOutputOptions({ maxLines: 10 })).toEqual({
      maxLines: 10,
      maxBytes: 51200,
      maxModelBytes: 262144,
      tailShare: 0.5,
    });
    expect(parseToolOutputOptions({ maxBytes: 1, maxModelBytes: 1_000_000 })).toEqual({
      maxLines: 2000,
      maxBytes: 1,
      maxModelBytes: 1_000_000,
      tailShare: 0.5,
    });
  });

  it('takes a preview mode and a tail share, and rejects others with EBADOPTION quoting them', () => {
    expect(parseToolOutputOptions({ preview: 'head+tail', tailShare: 0.25 })).toMatchObject({
      preview: 'head+tail',
      tailShare: 0.25,
    });
    expect(() => parseToolOutputOptions({ preview: 'tail' })).toThrow(
      'toolOutput.preview must be one of "head", "head+tail", got "tail"',
    );
    for (const bad of [0, 1, -0.5, '0.5']) {
      expect(() => parseToolOutputOptions({ tailShare: bad })).toThrow(
        expect.objectContaining({
          code: 'EBADOPTION',
          details: expect.objectContaining({ option: 'toolOutput.tailShare' }),
        }),
      );
    }
  });

  it('rejects values that are not positive integers with EBADOPTION, quoting the value', () => {
    const cases: Array<[string, unknown, string]> = [
      ['maxLines', 0, '0'],
      ['maxLines', -5, '-5'],
      ['maxBytes', 1.5, '1.5'],
      ['maxBytes', '100', '"100"'],
      ['maxModelBytes', null, 'null'],
      ['maxLines', Number.NaN, 'NaN'],
      ['maxBytes', Number.POSITIVE_INFINITY, 'Infinity'],
      ['maxModelBytes', 2 ** 53, '9007199254740992'],
    ];
    for (const [key, value, quoted] of cases) {
      let err: unknown;
      try {
        parseToolOutputOptions({ [key]: value });
      } catch (e) {
        err = e;
      }
      expect(err).toMatchObject({ code: 'EBADOPTION', details: { option: `toolOutput.${key}` } });
      expect((err as Error).message).toBe(`toolOutput.${key} must be a positive integer, got ${quoted}`);
    }
  });

  it('rejects unknown options and non-objects', () => {
    expect(() => parseToolOutputOptions({ maxLine: 5 })).toThrow(
      expect.objectContaining({ code: 'EBADOPTION', message: expect.stringContaining('toolOutput.maxLine') }),
    );
    for (const bad of [null, 5, 'big', [1]]) {
      expect(() => parseToolOutputOptions(bad)).toThrow(expect.objectContaining({ code: 'EBADOPTION' }));
    }
  });

  it('rejects a model view bound too small for the headings and hints of 16 streams and a status line', async () => {
    const min = minModelViewBytes(16, 2000) + MODEL_STATUS_RESERVE;
    expect(minModelBytes(2000)).toBe(min);
    expect(min).toBe(9919);
    expect(parseToolOutputOptions({ maxModelBytes: min }).maxModelBytes).toBe(min);
    const message = `toolOutput.maxModelBytes must be at least ${min} with maxLines 2000 (room for the headings and read hints of 16 streams and a status line), got ${min - 1}`;
    expect(() => parseToolOutputOptions({ maxModelBytes: min - 1 })).toThrow(
      expect.objectContaining({ code: 'EBADOPTION', message }),
    );
    // Engine.open applies the same rule with the same words, and opens at the minimum.
    const store = await fsp.mkdtemp(join(tmpdir(), 'sluice-min-'));
    try {
      await expect(Engine.open({ store, toolOutput: { maxModelBytes: min - 1 } })).rejects.toMatchObject({
        code: 'EBADOPTION',
        message,
      });
      const engine = await Engine.open({ store, toolOutput: { maxModelBytes: min } });
      expect(engine.options.toolOutput.maxModelBytes).toBe(min);
      await engine.close();
    } finally {
      await fsp.rm(store, { recursive: true, force: true });
    }
  });

  it('names the option path it was given', () => {
    expect(() => parseToolOutputOptions({ maxLines: 0 }, 'engine.toolOutput')).toThrow(
      'engine.toolOutput.maxLines must be a positive integer, got 0',
    );
  });
});
