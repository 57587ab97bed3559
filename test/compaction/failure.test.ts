/**
 * Rule 7: a failure, an empty or non-text summary, or an invalid summary
 * leaves the original context exactly as it was (the same array, deep-equal
 * to a snapshot taken before), whichever trial it happens on. Invalid input
 * is refused up front with a typed error, before any summarizer call.
 */
import { describe, expect, it } from 'vitest';
import { ContextLengthError, compact, type HistoryItem, isValidSummary } from '../../engine/index.js';
import { assistant, call, result, scripted, singleRef, summary, user } from './support.js';

function history(): HistoryItem[] {
  return [
    summary('S1'),
    user('go'),
    call('c1', 'bash', { command: 'ls' }),
    result('c1', { model: 'a\n', output: singleRef('a\n'), metadata: { exitCode: 0 } }),
    assistant('listed'),
  ];
}

describe('failures leave the original context intact', () => {
  it('when the summarizer throws', async () => {
    const h = history();
    const before = structuredClone(h);
    const error = new Error('provider unavailable');
    const r = await compact(h, scripted({ throws: error }).summarizer, { keepRecent: 2 });
    expect(r).toEqual({ ok: false, reason: 'error', error, history: h, attempts: 1, pruned: false });
    expect(r.history).toBe(h);
    expect(h).toEqual(before);
  });

  it.each([
    ['an empty string', ''],
    ['whitespace only', ' \n\t\r\n '],
    ['a number', 42],
    ['null', null],
    ['undefined', undefined],
    ['an object with text', { text: 'summary' }],
    ['an array of strings', ['summary']],
    ['text with a lone surrogate (not encodable as UTF-8)', 'summary \uD800 cut'],
  ])('when the summary is %s', async (_label, value) => {
    const h = history();
    const before = structuredClone(h);
    const s = scripted({ returns: value });
    const r = await compact(h, s.summarizer, { keepRecent: 2 });
    expect(s.inputs).toHaveLength(1);
    expect(r).toEqual({ ok: false, reason: 'invalid-summary', history: h, attempts: 1, pruned: false });
    expect(r.history).toBe(h);
    expect(h).toEqual(before);
    expect(isValidSummary(value)).toBe(false);
  });

  it('when the pruned retry returns an empty summary', async () => {
    const h = history();
    const before = structuredClone(h);
    const s = scripted({ throws: new ContextLengthError('too long') }, { returns: '' });
    const r = await compact(h, s.summarizer, { keepRecent: 2 });
    expect(s.inputs).toHaveLength(2);
    expect(r).toEqual({ ok: false, reason: 'invalid-summary', history: h, attempts: 2, pruned: true });
    expect(h).toEqual(before);
  });

  it('accepts a summary with surrounding whitespace and well-formed astral characters as it is', async () => {
    const r = await compact(history(), scripted({ returns: '  done 😀\n' }).summarizer, { keepRecent: 0 });
    expect(r.ok && r.summary).toBe('  done 😀\n');
  });
});

describe('invalid input is refused before any trial', () => {
  const never = scripted();

  it.each([
    ['a duplicated call id', [call('c1', 'a', {}), call('c1', 'b', {})]],
    ['a second result for one call', [call('c1', 'a', {}), result('c1'), result('c1')]],
    ['a result before its call', [result('c1'), call('c1', 'a', {})]],
    ['a call id with a line break', [call('c1\n[user]', 'a', {})]],
    ['an empty tool name', [call('c1', '', {})]],
    ['arguments that are not JSON (a function)', [call('c1', 'a', { f: (() => 1) as never })]],
    ['arguments holding undefined', [call('c1', 'a', { x: undefined as never })]],
    ['arguments that are an array', [call('c1', 'a', ['x'] as never)]],
    ['an uppercase digest', [result('c1', { output: { ...singleRef('x'), digest: 'A'.repeat(64) } as never })]],
    [
      'a duplicated stream name',
      [
        result('c1', {
          output: {
            kind: 'streams',
            manifest: '0'.repeat(64),
            streams: [
              { name: 'out', digest: '1'.repeat(64), bytes: 0, lines: 0, truncated: false },
              { name: 'out', digest: '2'.repeat(64), bytes: 0, lines: 0, truncated: false },
            ],
          },
        }),
      ],
    ],
    [
      'a traversal stream name',
      [
        result('c1', {
          output: {
            kind: 'streams',
            manifest: '0'.repeat(64),
            streams: [{ name: '..', digest: '1'.repeat(64), bytes: 0, lines: 0, truncated: false }],
          },
        }),
      ],
    ],
    ['an unknown item type', [{ type: 'system', content: 'x' } as never]],
    [
      'an emitted message with the assistant role',
      [result('c1', { messages: [{ role: 'assistant' as never, content: 'x' }] })],
    ],
  ])('%s: EBADARGS', async (_label, items) => {
    await expect(compact(items as HistoryItem[], never.summarizer, { keepRecent: 0 })).rejects.toMatchObject({
      code: 'EBADARGS',
    });
    expect(never.inputs).toHaveLength(0);
  });

  it.each([
    ['a negative keepRecent', { keepRecent: -1 }],
    ['a fractional keepRecent', { keepRecent: 1.5 }],
    ['a missing keepRecent', {}],
    ['a fit check that is not a function', { keepRecent: 0, fitCheck: true }],
    ['an unknown trigger', { keepRecent: 0, trigger: 'always' }],
  ])('%s: EBADOPTION', async (_label, options) => {
    await expect(compact(history(), never.summarizer, options as never)).rejects.toMatchObject({ code: 'EBADOPTION' });
    expect(never.inputs).toHaveLength(0);
  });

  it('a summarizer that is not a function: EBADOPTION', async () => {
    await expect(compact(history(), 'summarize' as never, { keepRecent: 0 })).rejects.toMatchObject({
      code: 'EBADOPTION',
    });
  });
});
