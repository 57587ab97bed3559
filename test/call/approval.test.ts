/**
 * prepare() and the host's approval policy: the policy runs on the main
 * thread, reached from the worker through comlink, and a refusal arrives in
 * the worker (and back in the result) as EDENIED before anything runs.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { PreparedOperation } from '../../engine/index.js';
import {
  closeEngines,
  engineWith,
  expectStoreClean,
  pgrep,
  sleep,
  streamBytes,
  uniqueSleep,
} from '../support/engines.js';

afterEach(closeEngines);

describe('approval of prepared operations', () => {
  it('the policy sees the prepared operation; a refusal fails the call with EDENIED before the command runs', async () => {
    const seen: PreparedOperation[] = [];
    const { engine, dir } = await engineWith([], {
      approve: (op) => {
        seen.push(op);
        return false;
      },
    });
    const sleeper = uniqueSleep();
    const r = await engine.run('bash', { command: `${sleeper.command} & echo ran` });
    expect(r).toMatchObject({ status: 'failed', complete: false, output: null, error: { code: 'EDENIED' } });
    expect(seen).toEqual([{ kind: 'process.spawn', command: `${sleeper.command} & echo ran`, cwd: dir }]);
    await sleep(100);
    expect(await pgrep(sleeper.marker)).toEqual([]);
    await expectStoreClean(engine);
  });

  it('a policy that throws denies too, and an allowing policy lets the call run', async () => {
    let allow = false;
    const { engine } = await engineWith([], {
      approve: async () => {
        if (!allow) throw new Error('policy offline');
        return true;
      },
    });
    const denied = await engine.run('bash', { command: 'echo ran' });
    expect(denied.error).toMatchObject({ code: 'EDENIED' });
    expect(denied.error?.message).toContain('policy offline');
    allow = true;
    const ok = await engine.run('bash', { command: 'echo ran' });
    expect(ok.status).toBe('success');
    expect(await streamBytes(engine, ok)).toEqual({ stdout: 'ran\n', stderr: '' });
  });
});
