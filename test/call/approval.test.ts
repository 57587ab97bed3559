/**
 * prepare() and the host's approval policy: the policy runs on the main
 * thread, reached from the worker through comlink, and a refusal arrives in
 * the worker (and back in the result) as EDENIED before anything runs.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { asksOnly } from '../../engine/call/default-approval.js';
import { defaultApproval, type PreparedOperation } from '../../engine/index.js';
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

  it('the default policy lets a spawn run without asking the main thread and still decides every read', async () => {
    const { engine, dir } = await engineWith([]);
    // The marker that lets workers skip the round trip: only fs.read is decided by looking.
    expect(asksOnly(defaultApproval(dir))).toEqual(['fs.read']);
    expect(asksOnly(() => true)).toBeUndefined();
    const ok = await engine.run('bash', { command: 'echo ran' });
    expect(ok.status).toBe('success');
    expect(await streamBytes(engine, ok)).toEqual({ stdout: 'ran\n', stderr: '' });
    const outside = await engine.run('read', { filePath: '/etc/hostname' });
    expect(outside).toMatchObject({ status: 'failed', error: { code: 'EDENIED' } });
  });

  it('a policy that wraps the default one is asked about every operation', async () => {
    const seen: string[] = [];
    const { engine, dir } = await engineWith([], {
      approve: (op, info) => {
        seen.push(op.kind);
        return defaultApproval(dir)(op, info);
      },
    });
    expect((await engine.run('bash', { command: 'true' })).status).toBe('success');
    expect(seen).toEqual(['process.spawn']);
  });
});
