/**
 * A batch submitted to a farm: `Engine.batch` with `queue` and `sluice
 * batch --queue`, against a real nats-server and real workers. Results
 * stream back with their worker and attempts (input order with
 * `ordered`), a submitter that dies is resumed from the queue's results,
 * and Ctrl-C withdraws the batch, cancelling its running calls on their
 * workers.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { BatchResult } from '../../engine/batch/batch.js';
import { Engine } from '../../engine/engine.js';
import { FarmWorker } from '../../engine/farm/index.js';
import { queueService } from '../support/queue.js';
import { FAST, sleep, urlOf, useQueues } from './helpers.js';
import { alive, startWorker, useProcesses } from './processes.js';

const queue = await queueService();

const parse = (stdout: string): BatchResult[] =>
  stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as BatchResult);

describe.runIf(queue)('a batch on a farm', () => {
  const open = useQueues(() => queue!);
  const procs = useProcesses();

  it('Engine.batch with a queue streams each result once with its worker and attempts; bad lines fail here, unknown tools there', async () => {
    const q = await open();
    const dir = await procs.dir();
    const engine = await Engine.open({ store: join(dir, 'store') });
    const worker = new FarmWorker(engine, await open(FAST, urlOf(q)), { concurrency: 4 });
    const running = worker.run();
    try {
      const items = [
        ...Array.from({ length: 12 }, (_, i) => ({ id: `e${i}`, tool: 'bash', args: { command: `echo ${i}` } })),
        'not json',
        { id: 'u', tool: 'nosuch' },
        { id: 'e1', tool: 'bash', args: { command: 'true' } },
      ];
      for (const ordered of [false, true]) {
        const got: BatchResult[] = [];
        for await (const r of engine.batch(items, { queue: q, session: `s-${ordered}`, ordered })) got.push(r);
        expect(got).toHaveLength(15);
        if (ordered) expect(got.map((r) => r.index)).toEqual([...Array(15).keys()]);
        const byIndex = new Map(got.map((r) => [r.index, r]));
        for (let i = 0; i < 12; i++) {
          expect(byIndex.get(i)).toMatchObject({
            id: `e${i}`,
            farm: { status: 'success', worker: q.worker, attempts: 1 },
          });
          expect(byIndex.get(i)?.farm?.output).toMatch(/^artifact:\/\/[0-9a-f]{64}$/);
        }
        expect(byIndex.get(12)).toMatchObject({ id: null, error: { code: 'EBADARGS' } });
        expect(byIndex.get(13)).toMatchObject({ id: 'u', farm: { status: 'failed', error: { code: 'EUNKNOWNTOOL' } } });
        expect(byIndex.get(14)).toMatchObject({ id: 'e1', error: { code: 'EBADARGS' } });
      }
      const page = await engine.read(`${(await q.result('s-false', 'e7'))?.output}/stdout`);
      expect(page.content).toBe('7\n');
      // Resubmitted whole: every result comes back resumed, nothing runs again.
      const again: BatchResult[] = [];
      for await (const r of engine.batch(items.slice(0, 12), { queue: q, session: 's-false' })) again.push(r);
      expect(again.every((r) => r.resumed === true)).toBe(true);
      expect(worker.load.taken).toBe(26);
    } finally {
      await worker.stop();
      await running;
      await engine.close();
    }
  });

  it('a submitter killed mid-batch is resumed: recorded results come back resumed, the rest as they finish, each once', async () => {
    const q = await open();
    const dir = await procs.dir();
    const store = join(dir, 'store');
    const input = join(dir, 'calls.jsonl');
    const n = 40;
    await fsp.writeFile(
      input,
      Array.from(
        { length: n },
        (_, i) => `${JSON.stringify({ id: `k${i}`, tool: 'bash', args: { command: `sleep 0.05; echo ${i}` } })}\n`,
      ).join(''),
    );
    await startWorker(procs, urlOf(q), store, ['--concurrency', '2']);
    const first = procs.spawn(['batch', input, '--queue', urlOf(q), '--session', 'r'], dir);
    await first.line(/"id":"k\d+"/);
    first.child.kill('SIGKILL');
    await first.exited;
    const before = parse(first.stdout.slice(0, first.stdout.lastIndexOf('\n') + 1));
    const second = procs.spawn(['batch', input, '--queue', urlOf(q), '--session', 'r'], dir);
    expect((await second.exited).code).toBe(0);
    const after = parse(second.stdout);
    expect(after.map((r) => r.id).sort()).toEqual(Array.from({ length: n }, (_, i) => `k${i}`).sort());
    const resumed = after.filter((r) => r.resumed).map((r) => r.id);
    // What the first one printed was recorded, so the second returns it resumed.
    for (const r of before) expect(resumed).toContain(r.id);
    for (const r of after) expect(r.farm).toMatchObject({ status: 'success', attempts: 1 });
    expect(await q.depth()).toBe(0);
  });

  it('Ctrl-C withdraws the batch: running calls are cancelled on their worker, queued ones never run, each gets one cancelled result', async () => {
    const q = await open();
    const dir = await procs.dir();
    const store = join(dir, 'store');
    const input = join(dir, 'calls.jsonl');
    const pids = join(dir, 'pids');
    await fsp.writeFile(
      input,
      Array.from(
        { length: 6 },
        (_, i) =>
          `${JSON.stringify({ id: `c${i}`, tool: 'bash', args: { command: `echo $$ >> ${pids}; exec sleep 30` } })}\n`,
      ).join(''),
    );
    const w = await startWorker(procs, urlOf(q), store, ['--concurrency', '2', '--name', 'w']);
    const sub = procs.spawn(['batch', input, '--queue', urlOf(q), '--session', 'x'], dir);
    const started = async () => (await fsp.readFile(pids, 'utf8').catch(() => '')).split('\n').filter(Boolean);
    while ((await started()).length < 2) await sleep(25);
    sub.child.kill('SIGINT');
    expect((await sub.exited).code).toBe(130);
    const got = parse(sub.stdout);
    expect(got.map((r) => r.id).sort()).toEqual(['c0', 'c1', 'c2', 'c3', 'c4', 'c5']);
    for (const r of got) expect(r.farm?.status).toBe('cancelled');
    const ran = got.filter((r) => r.farm?.worker === 'w');
    // The two running calls were cancelled on the worker (it recorded them, within the grace), the rest never ran.
    expect(ran).toHaveLength(2);
    for (const r of ran) expect(r.farm?.attempts).toBe(1);
    for (const r of got.filter((r) => r.farm?.worker !== 'w')) expect(r.farm?.attempts).toBe(0);
    for (const pid of await started()) expect(alive(Number(pid))).toBe(false);
    expect(await started()).toHaveLength(2);
    // The withdrawn items leave the queue as the worker takes them, unrun.
    const end = Date.now() + 10_000;
    while ((await q.depth()) > 0 && Date.now() < end) await sleep(50);
    expect(await q.depth()).toBe(0);
    expect(await started()).toHaveLength(2);
    w.child.kill('SIGTERM');
    expect((await w.exited).code).toBe(0);
  });
});
