/**
 * A worker that dies mid-call (process.exit in the tool, an uncaught
 * exception, heap exhaustion under resourceLimits) fails only its own call
 * with EWORKERCRASH; the output accepted before the crash is published as
 * incomplete, its child process group is killed, nothing is left in tmp/ or
 * pins/, and the pool serves the next call.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  closeEngines,
  engineWith,
  expectPoolServes,
  expectPublished,
  expectStoreClean,
  singleText,
  uniqueSleep,
  waitNoProcess,
} from '../support/engines.js';

afterEach(closeEngines);

describe('worker crashes', () => {
  it.each([
    ['process.exit in the tool', 'exit', /exited with code: 3/],
    ['an uncaught exception thrown from a timer', 'uncaught', /uncaught boom/],
  ])('%s fails the call with EWORKERCRASH and publishes the accepted output', async (_label, how, why) => {
    const { engine } = await engineWith(['crash']);
    const sleeper = uniqueSleep();
    const r = await engine.run('crash', { how, sleep: sleeper.seconds, partial: `before ${how}\n` });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EWORKERCRASH' } });
    expect(r.error?.message).toMatch(why);
    expect(await singleText(engine, r)).toBe(`before ${how}\n`);
    expect(r.model).toContain('[Status: failed. EWORKERCRASH');
    await expectPublished(engine, r.output);
    await expectStoreClean(engine);
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    await expectPoolServes(engine);
  });

  it('heap exhaustion under a small workerHeapMb fails only that call with EWORKERCRASH', async () => {
    const { engine } = await engineWith(['crash'], { workerHeapMb: 32 });
    const sleeper = uniqueSleep();
    const r = await engine.run('crash', { how: 'oom', sleep: sleeper.seconds, partial: 'before oom\n' });
    expect(r).toMatchObject({ status: 'failed', complete: false, error: { code: 'EWORKERCRASH' } });
    expect(r.error).toMatchObject({ details: { cause: 'ERR_WORKER_OUT_OF_MEMORY' } });
    expect(await singleText(engine, r)).toBe('before oom\n');
    await expectPublished(engine, r.output);
    await expectStoreClean(engine);
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    await expectPoolServes(engine);
  });

  // How the bug shows if it returns: workers are reused, so a timer a finished call left behind
  // throws during the next call on that thread and that innocent call fails with EWORKERCRASH.
  it('an exception from a timer left behind by a finished call does not fail the next call on its thread', async () => {
    const { engine } = await engineWith(['leaky'], { concurrency: 1 });
    const leaky = await engine.run('leaky', { delayMs: 300 });
    expect(leaky).toMatchObject({ status: 'success', complete: true });
    const next = await engine.run('bash', { command: 'sleep 0.6; echo innocent' });
    expect(next).toMatchObject({ status: 'success', complete: true });
    expect(next.model).toContain('innocent');
    await expectStoreClean(engine);
  });
});
