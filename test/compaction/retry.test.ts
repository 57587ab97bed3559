/**
 * Rule 2: only a local fit rejection (EFITREJECTED, or the fit check saying
 * false) or a provider context-length failure (ECONTEXTLENGTH) allows the
 * pruned retry, exactly once. Other errors, and the parent context having
 * overflowed, end compaction with the original context.
 */
import { describe, expect, it } from 'vitest';
import {
  BadUriError,
  ContextLengthError,
  compact,
  DiskError,
  FitRejectedError,
  type HistoryItem,
  ResourceLimitError,
  TimeoutError,
} from '../../engine/index.js';
import { assistant, call, result, scripted, scriptedFit, sha, singleRef, summary, user } from './support.js';

const OUT = 'ok\n';

function history(): HistoryItem[] {
  return [
    summary('S1'),
    user('go'),
    call('c1', 'fetch', { url: 'https://example.org' }),
    result('c1', { model: OUT, output: singleRef(OUT) }),
    assistant('done'),
  ];
}

/** Expects the failed outcome to hand back the caller's array, unchanged. */
function expectIntact(r: Awaited<ReturnType<typeof compact>>, h: HistoryItem[], before: HistoryItem[]): void {
  expect(r.ok).toBe(false);
  expect(r.history).toBe(h);
  expect(h).toEqual(before);
}

describe('the pruned retry', () => {
  it.each([
    ['EFITREJECTED from the summarizer', new FitRejectedError('input too large for the local window')],
    ['ECONTEXTLENGTH from the provider', new ContextLengthError('maximum context length is 8192 tokens')],
    ['a plain object with code ECONTEXTLENGTH (error crossed a boundary)', { code: 'ECONTEXTLENGTH', message: 'x' }],
    ['an Error carrying code EFITREJECTED', Object.assign(new Error('too big'), { code: 'EFITREJECTED' })],
  ])('follows %s, once, on the pruned snapshot', async (_label, error) => {
    const h = history();
    const before = structuredClone(h);
    const s = scripted({ throws: error }, { returns: 'S2' });
    const r = await compact(h, s.summarizer, { keepRecent: 1 });
    expect(s.inputs.map((i) => [i.attempt, i.pruned])).toEqual([
      [1, false],
      [2, true],
    ]);
    expect(s.inputs[1]?.text).toContain(`read(filePath="artifact://${sha(OUT)}")`);
    expect(s.inputs[1]?.text).not.toContain('[tool result c1: success]\nok\n');
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.attempts).toBe(2);
    expect(r.pruned).toBe(true);
    expect(r.history).toEqual([{ type: 'summary', content: 'S2' }, h[4]]);
    expect(r.history[1]).toBe(h[4]);
    expect(h).toEqual(before);
  });

  it('follows a fit check that says false, without calling the summarizer for the rejected trial', async () => {
    const fit = scriptedFit(false, true);
    const s = scripted({ returns: 'S2' });
    const r = await compact(history(), s.summarizer, { keepRecent: 1, fitCheck: fit.fitCheck });
    expect(fit.inputs.map((i) => i.attempt)).toEqual([1, 2]);
    expect(fit.inputs[0]?.pruned).toBe(false);
    expect(s.inputs.map((i) => i.attempt)).toEqual([2]);
    expect(s.inputs[0]).toBe(fit.inputs[1]);
    expect(r.ok && r.attempts).toBe(2);
  });

  it('follows a fit check that throws FitRejectedError', async () => {
    const fit = scriptedFit({ throws: new FitRejectedError('over budget') }, true);
    const s = scripted({ returns: 'S2' });
    const r = await compact(history(), s.summarizer, { keepRecent: 1, fitCheck: fit.fitCheck });
    expect(s.inputs.map((i) => i.pruned)).toEqual([true]);
    expect(r.ok).toBe(true);
  });

  it.each([
    ['ECONTEXTLENGTH twice', [new ContextLengthError('a'), new ContextLengthError('b')], 'context-length'],
    ['EFITREJECTED twice', [new FitRejectedError('a'), new FitRejectedError('b')], 'fit-rejected'],
    ['ECONTEXTLENGTH then EFITREJECTED', [new ContextLengthError('a'), new FitRejectedError('b')], 'fit-rejected'],
    ['EFITREJECTED then a generic error', [new FitRejectedError('a'), new Error('network down')], 'error'],
  ] as const)('ends after the second failure (%s) with the original context', async (_label, errors, reason) => {
    const h = history();
    const before = structuredClone(h);
    const s = scripted({ throws: errors[0] }, { throws: errors[1] });
    const r = await compact(h, s.summarizer, { keepRecent: 1 });
    expect(s.inputs).toHaveLength(2);
    expectIntact(r, h, before);
    if (r.ok) return;
    expect(r.reason).toBe(reason);
    expect(r.error).toBe(errors[1]);
    expect(r.attempts).toBe(2);
    expect(r.pruned).toBe(true);
  });

  it('ends after the fit check rejects the pruned snapshot too', async () => {
    const h = history();
    const before = structuredClone(h);
    const fit = scriptedFit(false, false);
    const s = scripted();
    const r = await compact(h, s.summarizer, { keepRecent: 1, fitCheck: fit.fitCheck });
    expect(fit.inputs).toHaveLength(2);
    expect(s.inputs).toHaveLength(0);
    expectIntact(r, h, before);
    expect(!r.ok && r.reason).toBe('fit-rejected');
  });

  it.each([
    ['a generic Error, even one whose message speaks of context length', new Error('context length exceeded')],
    ['EDISK', new DiskError('ENOSPC: no space left', { errno: 'ENOSPC' })],
    ['ETIMEOUT', new TimeoutError('summarizer took too long')],
    ['ERESOURCELIMIT', new ResourceLimitError('too many tokens requested')],
    ['EBADURI', new BadUriError('bad')],
    ['a TypeError', new TypeError('undefined is not a function')],
    ['a thrown string', 'context_length_exceeded'],
    ['a thrown null', null],
    ['an object with an unrelated code', { code: 'rate_limit_exceeded' }],
  ])('never retries after %s', async (_label, error) => {
    const h = history();
    const before = structuredClone(h);
    const s = scripted({ throws: error });
    const r = await compact(h, s.summarizer, { keepRecent: 1 });
    expect(s.inputs).toHaveLength(1);
    expect(s.inputs[0]?.pruned).toBe(false);
    expectIntact(r, h, before);
    if (r.ok) return;
    expect(r.reason).toBe('error');
    expect(r.attempts).toBe(1);
    expect(r.pruned).toBe(false);
    if (error !== null) expect(r.error).toBe(error);
  });

  it('never retries after a fit check that throws an unrelated error', async () => {
    const h = history();
    const before = structuredClone(h);
    const fit = scriptedFit({ throws: new Error('tokenizer missing') });
    const s = scripted();
    const r = await compact(h, s.summarizer, { keepRecent: 1, fitCheck: fit.fitCheck });
    expect(fit.inputs).toHaveLength(1);
    expect(s.inputs).toHaveLength(0);
    expectIntact(r, h, before);
  });

  it('does not prune because the parent context overflowed: the first trial is still the full history', async () => {
    const s = scripted({ returns: 'S2' });
    const r = await compact(history(), s.summarizer, { keepRecent: 1, trigger: 'overflow' });
    expect(s.inputs).toHaveLength(1);
    expect(s.inputs[0]?.pruned).toBe(false);
    expect(s.inputs[0]?.text).toContain('[tool result c1: success]\nok\n');
    expect(r.ok && r.pruned).toBe(false);
  });

  it('does not retry when the parent overflowed and the summarizer fails for another reason', async () => {
    const h = history();
    const before = structuredClone(h);
    const s = scripted({ throws: new ResourceLimitError('parent context overflow') });
    const r = await compact(h, s.summarizer, { keepRecent: 1, trigger: 'overflow' });
    expect(s.inputs).toHaveLength(1);
    expectIntact(r, h, before);
  });

  it('stops before the retry when the caller aborted meanwhile', async () => {
    const h = history();
    const before = structuredClone(h);
    const controller = new AbortController();
    const s = scripted({
      run: () => {
        controller.abort(new Error('user pressed escape'));
        throw new ContextLengthError('too long');
      },
    });
    const r = await compact(h, s.summarizer, { keepRecent: 1, signal: controller.signal });
    expect(s.inputs).toHaveLength(1);
    expectIntact(r, h, before);
    expect(!r.ok && [r.reason, r.attempts]).toEqual(['aborted', 1]);
  });

  it('never calls the summarizer when the signal is already aborted', async () => {
    const h = history();
    const s = scripted();
    const r = await compact(h, s.summarizer, { keepRecent: 1, signal: AbortSignal.abort() });
    expect(s.inputs).toHaveLength(0);
    expect(!r.ok && [r.reason, r.attempts]).toEqual(['aborted', 0]);
    expect(r.history).toBe(h);
  });
});
