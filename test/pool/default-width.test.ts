/**
 * The width an engine is asked for is the width it runs: `concurrency: N`
 * alone runs N calls at once (the threads' `callsPerThread` grows to carry
 * them), and settings that cannot carry N fail the open with EBADOPTION.
 * How the bug shows if it returns: with one thread on a two-core machine,
 * 1000 calls ran 256 at a time (the old fixed `callsPerThread` default), so
 * the barrier below is never reached by more than 256 of them.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { promises as fsp, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { earlyPoolOptions } from '../../engine/pool/pool.js';
import { closeEngines, expectStoreClean, openEngine, pgrep, sleep } from '../support/engines.js';

afterEach(closeEngines);

const WIDE = 1000;

/** Holds an exclusive flock on `lock` until its stdin ends: the barrier's gate. */
async function holdLock(lock: string): Promise<ChildProcess> {
  const holder = spawn('flock', ['-x', lock, 'sh', '-c', 'echo held; exec cat'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const [chunk] = (await once(holder.stdout as NodeJS.ReadableStream, 'data')) as [Buffer];
  expect(chunk.toString()).toBe('held\n');
  return holder;
}

/** The count of files in `dir` once it reaches `want` or has not grown for `stallMs` (the failure bound). */
async function countWhenSettled(dir: string, want: number, stallMs = 20_000): Promise<number> {
  let last = -1;
  let since = Date.now();
  for (;;) {
    const n = readdirSync(dir).length;
    if (n >= want) return n;
    if (n !== last) {
      last = n;
      since = Date.now();
    } else if (Date.now() - since > stallMs) {
      return n;
    }
    await sleep(100);
  }
}

describe('the width an engine runs', () => {
  it(`concurrency ${WIDE} and nothing else: all ${WIDE} calls are running at once (a barrier only all of them reach)`, async () => {
    const { engine, dir } = await openEngine({ concurrency: WIDE });
    expect(engine.options.threads * engine.options.callsPerThread).toBeGreaterThanOrEqual(WIDE);
    const started = join(dir, 'started');
    await fsp.mkdir(started);
    const lock = join(dir, 'lock');
    const marker = `${lock}-${process.pid}`;
    const holder = await holdLock(lock);
    let results: Awaited<ReturnType<typeof engine.run>>[];
    try {
      // Each call says it started, then waits on a shared lock the test holds exclusively.
      const calls = Array.from({ length: WIDE }, (_, i) =>
        engine.run('bash', { command: `touch ${started}/${i}; flock -s ${lock} echo ${marker} ${i}` }),
      );
      expect(await countWhenSettled(started, WIDE)).toBe(WIDE);
      expect(engine.metricsSnapshot().pool).toMatchObject({ running: WIDE, queued: 0 });
      holder.stdin?.end();
      results = await Promise.all(calls);
    } finally {
      holder.stdin?.end();
      if (holder.exitCode === null) await once(holder, 'exit');
    }
    expect(results.filter((r) => r.status !== 'success')).toEqual([]);
    expect(await pgrep(marker)).toEqual([]);
    await expectStoreClean(engine);
  }, 180_000);

  it('threads × callsPerThread, both set, below the concurrency asked for: EBADOPTION at open naming concurrency, no thread left', async () => {
    const settings = { concurrency: 1000, threads: 1, callsPerThread: 100 };
    // The early pool never starts for it.
    expect(earlyPoolOptions(settings)).toBeUndefined();
    const threadsBefore = readdirSync('/proc/self/task').length;
    await expect(openEngine(settings)).rejects.toMatchObject({
      code: 'EBADOPTION',
      details: { option: 'concurrency' },
      message: /1000 .*threads \(1\) × callsPerThread \(100\) = 100/,
    });
    expect(readdirSync('/proc/self/task').length).toBeLessThanOrEqual(threadsBefore);
  });

  it('an unset concurrency is what explicit threads and callsPerThread carry; an unset callsPerThread carries the concurrency', async () => {
    const { engine: narrow } = await openEngine({ threads: 1, callsPerThread: 4 });
    expect(narrow.options).toMatchObject({ concurrency: 4, threads: 1, callsPerThread: 4 });
    const { engine: wide } = await openEngine({ threads: 2, concurrency: 1024, minThreads: 0 });
    expect(wide.options).toMatchObject({ concurrency: 1024, threads: 2, callsPerThread: 512 });
    // The early pool is the same one resolveOptions asks for.
    expect(earlyPoolOptions({ threads: 2, concurrency: 1024 })).toMatchObject({
      concurrency: 1024,
      callsPerThread: 512,
    });
    expect(earlyPoolOptions({ threads: 1, callsPerThread: 4 })).toMatchObject({ concurrency: 4, callsPerThread: 4 });
  });
});
