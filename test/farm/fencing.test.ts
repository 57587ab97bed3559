/**
 * A worker stopped past its lease and resumed cannot record a second
 * result: the server fences the result, not the ack (a late ack of a stale
 * delivery is still accepted). The stalled worker is a real process held
 * with SIGSTOP.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { queueService } from '../support/queue.js';
import { recorded, sleep, urlOf, useQueues } from './helpers.js';

const HOLDER = fileURLToPath(new URL('../fixtures/farm/holder.mjs', import.meta.url));
const queue = await queueService();

/** A holder process and its JSON line protocol. */
function holder(url: string, worker: string) {
  const child = spawn(process.execPath, [HOLDER, url, worker], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async () => JSON.parse((await lines.next()).value as string) as Record<string, unknown>;
  const ask = async (op: string) => {
    child.stdin!.write(`${JSON.stringify({ op })}\n`);
    return next();
  };
  return { child, next, ask };
}

const exited = (c: ChildProcess) =>
  new Promise<void>((resolve) =>
    c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', () => resolve()),
  );

describe.runIf(queue)('fencing of a stalled worker', () => {
  const open = useQueues(() => queue!);
  const children: ChildProcess[] = [];
  afterEach(async () => {
    for (const c of children.splice(0)) {
      c.kill('SIGCONT');
      c.kill('SIGKILL');
      await exited(c);
    }
  });

  it('a holder stopped (SIGSTOP) past its lease loses the item to another worker, and once resumed gets already-recorded', async () => {
    const mine = await open({ ackWaitMs: 1000, maxAttempts: 3, worker: 'survivor' });
    await mine.submit('b', 'x', { tool: 'bash', args: { command: 'true' } });
    const stalled = holder(urlOf(mine), 'stalled');
    children.push(stalled.child);
    expect(await stalled.next()).toEqual({ ready: true });
    expect(await stalled.ask('take')).toEqual({ took: 'x', attempt: 1 });

    // Renewing, the holder keeps the item for longer than its lease...
    expect(await mine.take({ timeoutMs: 1500 })).toBeNull();
    // ...stopped, it renews nothing, and the item goes to the next worker.
    stalled.child.kill('SIGSTOP');
    const taken = await mine.take({ timeoutMs: 4000 });
    expect(taken).toMatchObject({ itemId: 'x', attempt: 2 });
    const outcome = await taken!.hold(() =>
      mine.recordResult('b', 'x', { status: 'success', worker: 'survivor', attempts: taken!.attempt }),
    );
    expect(outcome.outcome).toBe('recorded');
    expect(await taken!.complete()).toBe(true);

    stalled.child.kill('SIGCONT');
    await sleep(100);
    expect(await stalled.ask('record')).toEqual({ outcome: 'already-recorded', by: 'survivor' });
    expect(await recorded(mine, 'b')).toEqual(new Map([['x', 'survivor']]));
    expect(await mine.result('b', 'x')).toMatchObject({ worker: 'survivor', attempts: 2 });

    stalled.child.stdin!.end();
    await exited(stalled.child);
    expect(stalled.child.exitCode).toBe(0);
    expect(await mine.depth()).toBe(0);
  });
});
