/**
 * `sluice worker` as a real process on a real nats-server: it runs queued
 * calls on its own engine, records them in the batch's session and their
 * results in the queue, keeps a long call's lease, drains on SIGTERM
 * (finishing, or handing back past its deadline) and exits 0, and serves
 * its load in /v1/metrics.
 */
import { existsSync, promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine } from '../../engine/engine.js';
import type { FarmQueue, FarmResult } from '../../engine/farm/index.js';
import { queueService } from '../support/queue.js';
import { FAST, sleep, urlOf, useQueues } from './helpers.js';
import { alive, startWorker, useProcesses } from './processes.js';

const queue = await queueService();

/** Follows batch `batchId`'s results until `n` arrived. */
async function results(q: FarmQueue, batchId: string, n: number): Promise<Map<string, FarmResult>> {
  const out = new Map<string, FarmResult>();
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), 20_000);
  try {
    for await (const r of q.results(batchId, { follow: true, signal: stop.signal })) {
      expect(out.has(r.itemId)).toBe(false);
      out.set(r.itemId, r.result);
      if (out.size === n) break;
    }
  } finally {
    clearTimeout(timer);
  }
  return out;
}

async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

describe.runIf(queue)('sluice worker', () => {
  const open = useQueues(() => queue!);
  const procs = useProcesses();

  it('runs queued calls on its engine, records them in the session and their results, and an unknown tool fails EUNKNOWNTOOL', async () => {
    const q = await open();
    const store = join(await procs.dir(), 'store');
    await q.submit('b', 'i1', { tool: 'bash', args: { command: 'echo one' }, session: 's' });
    await q.submit('b', 'i2', { tool: 'bash', args: { command: 'echo two; exit 3' }, session: 's' });
    await q.submit('b', 'i3', { tool: 'nosuch', args: {}, session: 's' });
    const w = await startWorker(procs, urlOf(q), store, ['--name', 'w1', '--concurrency', '2']);
    const got = await results(q, 'b', 3);
    expect(got.get('i1')).toMatchObject({ status: 'success', worker: 'w1', attempts: 1, callId: 'i1' });
    expect(got.get('i2')).toMatchObject({ status: 'failed', worker: 'w1', attempts: 1, callId: 'i2' });
    expect(got.get('i3')).toMatchObject({
      status: 'failed',
      worker: 'w1',
      attempts: 1,
      error: { code: 'EUNKNOWNTOOL' },
    });
    expect(got.get('i3')?.error?.message).toContain('nosuch');
    await until('the acks', async () => (await q.depth()) === 0);

    w.child.kill('SIGTERM');
    expect(await w.exited).toEqual({ code: 0, signal: null });
    expect(w.stderr).toContain('stopped: 3 recorded (2 not success), 0 fenced, 0 handed back');

    const engine = await Engine.open({ store });
    try {
      const replayed = await engine.replay('s');
      const calls = new Map(replayed.calls.map((c) => [c.callId, c.result]));
      expect([...calls.keys()].sort()).toEqual(['i1', 'i2']);
      const one = calls.get('i1')!;
      expect(one.output?.kind).toBe('streams');
      expect(got.get('i1')?.output).toBe(`artifact://${(one.output as { manifest: string }).manifest}`);
      const page = await engine.read(`${got.get('i1')!.output}/stdout`);
      expect(page.content).toBe('one\n');
      expect(calls.get('i2')?.metadata.exitCode).toBe(3);
    } finally {
      await engine.close();
    }
  });

  it('keeps the lease of a call longer than it, and a SIGTERM lets the call finish and record before exit 0', async () => {
    const q = await open(FAST);
    const dir = await procs.dir();
    const marker = join(dir, 'started');
    await q.submit('b', 'long', { tool: 'bash', args: { command: `touch ${marker}; sleep 2.5; echo done` } });
    const w = await startWorker(procs, urlOf(q), join(dir, 'store'));
    await until('the call to start', () => existsSync(marker));
    const other = await open(FAST, urlOf(q));
    w.child.kill('SIGTERM');
    // Lease 1 s, call 2.5 s: renewed, nobody else is handed the item.
    expect(await other.take({ timeoutMs: 2000 })).toBeNull();
    expect(await w.exited).toEqual({ code: 0, signal: null });
    expect(w.stderr).toContain('draining (1 running)');
    expect(await q.result('b', 'long')).toMatchObject({ status: 'success', attempts: 1 });
    expect(await q.depth()).toBe(0);
  });

  it('a drain past --drain-ms hands the running call back: cancelled here, run again elsewhere as attempt 2, exit 0', async () => {
    const q = await open(FAST);
    const dir = await procs.dir();
    const marker = join(dir, 'started');
    await q.submit('b', 'slow', {
      tool: 'bash',
      args: { command: `echo $$ > ${marker}; exec sleep 30` },
      session: 's',
    });
    const w = await startWorker(procs, urlOf(q), join(dir, 'store'), ['--drain-ms', '200']);
    await until('the call to start', async () => (await fsp.readFile(marker, 'utf8').catch(() => '')).endsWith('\n'));
    const toolPid = Number((await fsp.readFile(marker, 'utf8')).trim());
    w.child.kill('SIGTERM');
    expect(await w.exited).toEqual({ code: 0, signal: null });
    expect(w.stderr).toContain('1 handed back');
    expect(await q.result('b', 'slow')).toBeUndefined();
    const again = await q.take({ timeoutMs: 3000 });
    expect(again).toMatchObject({ itemId: 'slow', attempt: 2 });
    await again!.complete();
    // The tool's process went with the cancelled call.
    await until('the tool process to end', () => !alive(toolPid));
  });

  it('with --listen it serves its load in /v1/metrics', async () => {
    const q = await open();
    const dir = await procs.dir();
    const store = join(dir, 'store');
    await q.submit('b', 'x', { tool: 'bash', args: { command: 'true' } });
    await q.submit('b', 'y', { tool: 'nosuch', args: {} });
    const w = await startWorker(procs, urlOf(q), store, ['--listen', '127.0.0.1:0']);
    const url = /serving (http:\S+)\)/.exec(await w.line(/serving/))?.[1];
    await results(q, 'b', 2);
    const token = (await fsp.readFile(join(store, 'server.token'), 'utf8')).trim();
    let text = '';
    await until('both results to be counted', async () => {
      const res = await fetch(`${url}/v1/metrics`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      text = await res.text();
      return /^sluice_farm_completed_total 2$/m.test(text);
    });
    expect(text).toMatch(/^sluice_farm_running 0$/m);
    expect(text).toMatch(/^sluice_farm_taken_total 2$/m);
    expect(text).toMatch(/^sluice_farm_completed_total 2$/m);
    expect(text).toMatch(/^sluice_farm_failed_total 1$/m);
    expect(text).toMatch(/^sluice_farm_redelivered_total 0$/m);
    expect(text).toMatch(/^sluice_farm_draining 0$/m);
    const polled = Number(/^sluice_farm_last_poll_timestamp_seconds (\S+)$/m.exec(text)?.[1]);
    expect(Date.now() / 1000 - polled).toBeLessThan(30);
    w.child.kill('SIGINT');
    expect(await w.exited).toEqual({ code: 0, signal: null });
  });
});
