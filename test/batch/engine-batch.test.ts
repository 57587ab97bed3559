/**
 * Engine.batch: one result per item, in completion order or (ordered) input
 * order; the input is pulled only as results are consumed and, ordered,
 * never more than 4 x concurrency items past the oldest unreturned result;
 * invalid items get error results; ids already completed in the session are
 * resumed, not run again; breaking out stops the batch and cancels its calls.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { BatchResult } from '../../engine/batch/batch.js';
import { OversizeLine } from '../../engine/batch/items.js';
import { lines, MAX_BATCH_LINE_BYTES } from '../../engine/batch/lines.js';
import type { CallEvent } from '../../engine/result.js';
import { batchResultSchema } from '../../engine/wire/schemas.js';
import {
  closeEngines,
  engineWith,
  expectStoreClean,
  pgrep,
  singleText,
  sleep,
  uniqueSleep,
  waitNoProcess,
  waitProcess,
} from '../support/engines.js';

afterEach(closeEngines);

async function collect(it: AsyncIterable<BatchResult>): Promise<BatchResult[]> {
  const out: BatchResult[] = [];
  for await (const r of it) out.push(r);
  return out;
}

/** An input that counts how many items were pulled from it. */
function counted<T>(items: T[]): { input: AsyncIterable<T>; pulled: () => number } {
  let n = 0;
  return {
    input: (async function* () {
      for (const i of items) {
        n++;
        yield i;
      }
    })(),
    pulled: () => n,
  };
}

/** Resolves once `n` calls have completed on the engine. */
async function completions(events: AsyncIterable<CallEvent | { type: 'lagged' }>, n: number): Promise<void> {
  let seen = 0;
  for await (const ev of events) if (ev.type === 'completed' && ++seen >= n) return;
}

describe('Engine.batch', () => {
  it('runs every item once and yields one result per item, each with its id and index', async () => {
    const { engine } = await engineWith(['echo']);
    const items = Array.from({ length: 50 }, (_, i) => ({ id: `e${i}`, tool: 'echo', args: { text: `t${i}\n` } }));
    const results = await collect(engine.batch(items, { concurrency: 8 }));
    expect(results).toHaveLength(50);
    expect(results.map((r) => r.index).sort((a, b) => a - b)).toEqual(items.map((_, i) => i));
    for (const r of results) {
      expect(r.result).toMatchObject({ callId: r.id, status: 'success', complete: true });
      expect(await singleText(engine, r.result as never)).toBe(`t${r.index}\n`);
    }
    await expectStoreClean(engine);
  });

  it('ordered: results come back in input order, and reading stops 4 x concurrency items past a slow first item', async () => {
    const { engine, dir } = await engineWith(['echo']);
    const release = join(dir, 'release');
    const slow = {
      id: 'slow',
      tool: 'bash',
      args: {
        command: `n=0; while [ ! -e ${release} ]; do n=$((n+1)); [ $n -gt 3000 ] && exit 7; sleep 0.02; done; echo slow`,
      },
    };
    const rest = Array.from({ length: 30 }, (_, i) => ({ id: `e${i}`, tool: 'echo', args: { text: `${i}` } }));
    const { input, pulled } = counted([slow, ...rest]);
    const events = engine.events();
    const results = engine.batch(input, { concurrency: 2, ordered: true });
    const first = results.next();
    // Window 8: items 1..7 can run while item 0 waits; once they have, the reader must be stuck.
    await completions(events, 7);
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(pulled()).toBeLessThanOrEqual(9);
    await fsp.writeFile(release, '');
    const all = [(await first).value as BatchResult, ...(await collect({ [Symbol.asyncIterator]: () => results }))];
    expect(all.map((r) => r.index)).toEqual(Array.from({ length: 31 }, (_, i) => i));
    expect(all[0]?.result?.status).toBe('success');
    await expectStoreClean(engine);
  });

  it('completion order: a consumer that stops pulling stops the reading (backpressure)', async () => {
    const { engine } = await engineWith(['echo']);
    const items = Array.from({ length: 100 }, (_, i) => ({ id: `e${i}`, tool: 'echo', args: { text: `${i}` } }));
    const { input, pulled } = counted(items);
    const events = engine.events();
    const results = engine.batch(input, { concurrency: 4 });
    // Nothing is consumed: at most 4 calls run and wait to be consumed, so at most 4 complete.
    const first = results.next();
    await first;
    await completions(events, 4);
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(pulled()).toBeLessThanOrEqual(6);
    const rest = await collect({ [Symbol.asyncIterator]: () => results });
    expect(rest.length + 1).toBe(100);
    expect(pulled()).toBe(100);
  });

  it('bad items get per-item errors and the batch goes on', async () => {
    const { engine } = await engineWith(['echo']);
    const input = [
      '{"id":"ok1","tool":"echo","args":{"text":"a"}}',
      'not json',
      '[1,2]',
      '',
      '{"tool":"echo"}',
      '{"id":"bad id!","tool":"echo"}',
      '{"id":"u","tool":"echo","arg":{}}',
      '{"id":"ok1","tool":"echo","args":{"text":"dup"}}',
      '{"id":"t","tool":"nope"}',
      '{"id":"s","tool":"echo","args":{"text":"x"},"session":"bad session!"}',
      '{"id":"a","tool":"echo","args":{"text":1}}',
      new OversizeLine(9 * 1024 * 1024, MAX_BATCH_LINE_BYTES),
      { id: 7, tool: 'echo', args: { text: 'seven' } },
    ];
    const results = await collect(engine.batch(input, { ordered: true }));
    const by = (index: number) => results.find((r) => r.index === index);
    expect(results).toHaveLength(12); // the blank line yields nothing
    expect(by(0)?.result?.status).toBe('success');
    expect(by(1)).toMatchObject({ id: null, error: { code: 'EBADARGS', message: /not JSON/ } });
    expect(by(2)).toMatchObject({ id: null, error: { code: 'EBADARGS', message: /an array/ } });
    expect(by(3)).toBeUndefined();
    expect(by(4)).toMatchObject({ id: null, error: { code: 'EBADARGS', message: /id must be/ } });
    expect(by(5)).toMatchObject({ id: null, error: { code: 'EBADARGS', message: /"bad id!"/ } });
    expect(by(6)).toMatchObject({ id: 'u', error: { code: 'EBADARGS', message: /unknown field "arg"/ } });
    expect(by(7)).toMatchObject({ id: 'ok1', error: { code: 'EBADARGS', message: /duplicate id "ok1"/ } });
    expect(by(8)).toMatchObject({ id: 't', error: { code: 'EUNKNOWNTOOL' } });
    expect(by(9)).toMatchObject({ id: 's', error: { code: 'EBADARGS' } });
    // Arguments the tool rejects are the call's own failure, recorded like any call.
    expect(by(10)?.result).toMatchObject({ status: 'failed', error: { code: 'EBADARGS' } });
    expect(by(11)).toMatchObject({
      id: null,
      error: {
        code: 'EBADARGS',
        message: 'the line is 9437184 bytes, over the bound of 8388608 bytes on one batch line',
      },
    });
    expect(by(12)?.result).toMatchObject({ callId: '7', status: 'success' });
    // Every result, call or not, is a valid BatchResult of the wire contract.
    for (const r of results) expect(batchResultSchema.strict().safeParse(r).success, JSON.stringify(r)).toBe(true);
    await expectStoreClean(engine);
  });

  it('resume: ids completed in the session are not run again; their recorded results come back resumed', async () => {
    const { engine } = await engineWith(['echo']);
    const items = Array.from({ length: 40 }, (_, i) => ({ id: `r${i}`, tool: 'echo', args: { text: `v${i}` } }));
    // A first run consumed 10 results and stopped: the rest were cancelled or never started.
    const firstRun: BatchResult[] = [];
    for await (const r of engine.batch(items, { session: 'resume', concurrency: 4 })) {
      firstRun.push(r);
      if (firstRun.length === 10) break;
    }
    expect(firstRun.every((r) => r.result?.status === 'success')).toBe(true);
    // Calls that completed but were not consumed before the stop are recorded too: they count as done.
    const recorded = (await engine.replay('resume')).calls;
    const done = new Set(recorded.filter((c) => c.result.status === 'success').map((c) => c.callId));
    for (const r of firstRun) expect(done.has(r.id as string)).toBe(true);
    expect(done.size).toBeLessThan(40);
    const second = await collect(engine.batch(items, { session: 'resume', concurrency: 4 }));
    expect(second).toHaveLength(40);
    for (const r of second) {
      expect(r.result?.status, String(r.id)).toBe('success');
      if (done.has(r.id as string)) {
        expect(r.resumed).toBe(true);
        const before = recorded.find((c) => c.callId === r.id)?.result;
        expect(r.result).toEqual(before);
      } else expect(r.resumed).toBeUndefined();
    }
    // Every call ran exactly once over both runs, except those cancelled by the stop, which ran again.
    const replay = await engine.replay('resume');
    const successes = replay.calls.filter((c) => c.result.status === 'success').map((c) => c.callId.split('#')[0]);
    expect(new Set(successes).size).toBe(40);
    expect(successes).toHaveLength(40);
    // A cancelled first attempt ran again under a new call id: the log never reuses one.
    for (const c of replay.calls.filter((c) => c.callId.includes('#'))) expect(c.callId).toMatch(/^r[0-9]+#2$/);
    await expectStoreClean(engine);
  });

  it('resume across more sessions than the batch keeps open at once (40 items, one session each)', async () => {
    const { engine } = await engineWith(['echo']);
    const items = Array.from({ length: 40 }, (_, i) => ({
      id: `m${i}`,
      tool: 'echo',
      args: { text: `${i}` },
      session: `many-${i}`,
    }));
    const first = await collect(engine.batch(items, { concurrency: 8 }));
    expect(first.filter((r) => r.result?.status === 'success')).toHaveLength(40);
    const second = await collect(engine.batch(items, { concurrency: 8 }));
    expect(second.filter((r) => r.resumed)).toHaveLength(40);
    for (const r of second) expect(r.result).toEqual(first.find((f) => f.id === r.id)?.result);
    await expectStoreClean(engine);
  });

  it('breaking out of the loop cancels the running calls and leaves no process behind', async () => {
    const { engine } = await engineWith([]);
    const sleeper = uniqueSleep();
    const items = Array.from({ length: 20 }, (_, i) => ({
      id: `s${i}`,
      tool: 'bash',
      args: { command: sleeper.command },
    }));
    items.unshift({ id: 'quick', tool: 'bash', args: { command: 'echo quick' } });
    const got: BatchResult[] = [];
    for await (const r of engine.batch(items, { concurrency: 4 })) {
      got.push(r);
      break;
    }
    expect(got[0]?.id).toBe('quick');
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    await expectStoreClean(engine);
  });

  it('an aborted signal stops reading; running calls end cancelled and their results still come back', async () => {
    const { engine } = await engineWith([]);
    const sleeper = uniqueSleep();
    const items = Array.from({ length: 20 }, (_, i) => ({
      id: `s${i}`,
      tool: 'bash',
      args: { command: sleeper.command },
    }));
    const stop = new AbortController();
    const results = engine.batch(items, { concurrency: 3, signal: stop.signal });
    const pending = collect(results);
    await waitProcess(sleeper.marker);
    while ((await pgrep(sleeper.marker)).length < 3) await sleep(20);
    stop.abort();
    const all = await pending;
    expect(all).toHaveLength(3);
    for (const r of all) expect(r.result).toMatchObject({ status: 'cancelled', error: { code: 'ECANCELLED' } });
    expect(await waitNoProcess(sleeper.marker)).toEqual([]);
    await expectStoreClean(engine);
  });
});

describe('batch lines', () => {
  it('splits on \\n across chunks, drops a trailing \\r, and reports a line past the bound without holding it', async () => {
    async function* chunks() {
      yield Buffer.from('{"a":1}\r\n{"b"');
      yield Buffer.from(':2}\nxxxxxxxxxx');
      yield Buffer.from('xxxxxxxxxx\nlast');
    }
    const got: unknown[] = [];
    for await (const l of lines(chunks(), 16)) got.push(l);
    expect(got).toEqual(['{"a":1}', '{"b":2}', new OversizeLine(20, 16), 'last']);
  });
});
