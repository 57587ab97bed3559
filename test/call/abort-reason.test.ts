/**
 * A caller's AbortSignal keeps its reason: an Error or string reason is in
 * the cancelled result's message and display, a timed-out signal
 * (AbortSignal.timeout) fails the call with ETIMEOUT like the call's own
 * timeoutMs, a plain abort() is "cancelled by the caller". Each ends with
 * the store clean and no process left.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { callerAbortError } from '../../engine/call/abort-reason.js';
import {
  closeEngines,
  engineWith,
  expectStoreClean,
  uniqueSleep,
  waitForDisplay,
  waitNoProcess,
} from '../support/engines.js';

afterEach(closeEngines);

describe("the caller's abort reason", () => {
  it.each([
    ['an Error', new Error('user abort'), 'cancelled by the caller: user abort'],
    ['a string', 'stop now', 'cancelled by the caller: stop now'],
    ['nothing (abort())', undefined, 'cancelled by the caller'],
  ])('%s as the reason ends the call cancelled with that reason', async (_what, reason, message) => {
    const { engine } = await engineWith(['cooperative']);
    const sleeper = uniqueSleep();
    const ac = new AbortController();
    const handle = engine.call('cooperative', { sleep: sleeper.seconds }, { signal: ac.signal });
    await waitForDisplay(handle, 'ready');
    ac.abort(reason);
    const r = await handle.result;
    expect(r).toMatchObject({ status: 'cancelled', complete: false, error: { code: 'ECANCELLED', message } });
    expect(r.display).toContain(`Reason: ECANCELLED: ${message}\n`);
    expect(r.model).toContain('[Status: cancelled.');
    await expectStoreClean(engine);
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
  });

  it('AbortSignal.timeout() fails the call with ETIMEOUT, not a bare cancellation', async () => {
    const { engine } = await engineWith(['cooperative']);
    const sleeper = uniqueSleep();
    // The tool sleeps far longer than the signal waits: only the signal can end it.
    const r = await engine.run('cooperative', { sleep: sleeper.seconds }, { signal: AbortSignal.timeout(200) });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'ETIMEOUT' } });
    expect(r.error?.message).toBe("the caller's signal timed out: The operation was aborted due to timeout");
    expect(r.error?.details).toEqual({ reason: 'signal' });
    await expectStoreClean(engine);
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
  });

  it('an already aborted signal with a reason cancels before the start, keeping the reason', async () => {
    const { engine } = await engineWith(['cooperative']);
    const r = await engine.run('cooperative', {}, { signal: AbortSignal.abort(new Error('not wanted')) });
    expect(r).toMatchObject({
      status: 'cancelled',
      output: null,
      error: { code: 'ECANCELLED', message: 'cancelled by the caller: not wanted' },
    });
    await expectStoreClean(engine);
  });

  it('a reason longer than 1000 UTF-16 units is cut on a code point', () => {
    const err = callerAbortError(new Error(`${'a'.repeat(999)}😀tail`));
    expect(err.message).toBe(`cancelled by the caller: ${'a'.repeat(999)}…`);
    expect(callerAbortError(new DOMException('boom', 'AbortError')).message).toBe('cancelled by the caller');
    expect(callerAbortError(new DOMException('late', 'TimeoutError')).code).toBe('ETIMEOUT');
  });
});
