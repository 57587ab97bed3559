/**
 * The page's call list is bounded (web/calls-bound.ts, used by
 * web/calls-model.ts): past MAX_CALLS_HELD it forgets the oldest ended calls,
 * running ones stay, and the bytes forgotten are handed back so the chart's
 * total never goes back.
 */
import { describe, expect, it } from 'vitest';
import { forgetOldest, MAX_CALLS_HELD } from '../../web/calls-bound.js';
import type { CallSummary } from '../../web/types.js';

function summary(i: number, status: CallSummary['status'], bytes = 10): CallSummary {
  return {
    callId: `call-${i}`,
    tool: 'bash',
    status,
    complete: status === 'running' ? null : true,
    startedAt: new Date(0).toISOString(),
    durationMs: status === 'running' ? null : 1,
    streams: [{ name: 'stdout', bytes, lines: 1 }],
    version: 1,
  };
}

describe('the page keeps a bounded list of calls', () => {
  it('forgets the oldest ended calls past the bound, keeps running ones, and returns their bytes', () => {
    const calls = new Map<string, CallSummary>();
    calls.set('call-0', summary(0, 'running'));
    for (let i = 1; i <= MAX_CALLS_HELD + 5; i++) calls.set(`call-${i}`, summary(i, 'success'));
    expect(forgetOldest(calls, MAX_CALLS_HELD)).toBe(6 * 10);
    expect(calls.size).toBe(MAX_CALLS_HELD);
    // The oldest call runs still: kept; the six oldest ended ones are gone.
    expect(calls.has('call-0')).toBe(true);
    for (let i = 1; i <= 7; i++) expect(calls.has(`call-${i}`)).toBe(i === 7);
    // Within the bound nothing is forgotten.
    expect(forgetOldest(calls, MAX_CALLS_HELD)).toBe(0);
    expect(calls.size).toBe(MAX_CALLS_HELD);
  });

  it('holds more than the bound when every call still runs', () => {
    const calls = new Map<string, CallSummary>();
    for (let i = 0; i < 12; i++) calls.set(`call-${i}`, summary(i, 'running'));
    expect(forgetOldest(calls, 10)).toBe(0);
    expect(calls.size).toBe(12);
  });
});
