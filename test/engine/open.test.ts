/**
 * How Engine.open starts: the first worker starts booting before anything
 * else is loaded or validated, and the built-ins are registered from their
 * generated descriptions (engine/builtins/descriptions.ts) without a worker round
 * trip. How the bugs show if they return: a stale generated file lists an
 * argument schema or stream declaration the tool no longer has; an open that
 * fails after the early pool started leaves a worker thread running.
 */
import { promises as fsp, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BUILTIN_TOOLS } from '../../engine/builtins/descriptions.js';
import { BUILTIN_NAMES, builtinTool } from '../../engine/builtins/names.js';
import { Engine } from '../../engine/index.js';
import { defaultPoolOptions, earlyPoolOptions, WorkerPool } from '../../engine/pool/pool.js';
import { describeModule } from '../../engine/registry.js';
import { closeEngines, openEngine } from '../support/engines.js';

afterEach(closeEngines);

/** OS threads of this process (worker threads included). */
function threadCount(): number {
  return readdirSync('/proc/self/task').length;
}

/** The thread count once it has stopped changing (a terminated worker's thread takes a moment to go). */
async function settledThreads(): Promise<number> {
  const until = Date.now() + 5000;
  let last = threadCount();
  let stableSince = Date.now();
  while (Date.now() - stableSince < 300 && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 25));
    const n = threadCount();
    if (n !== last) {
      last = n;
      stableSince = Date.now();
    }
  }
  return last;
}

describe('built-in tool descriptions', () => {
  it('the committed descriptions are what the built-in modules describe in a worker (run `npm run schema` after changing one)', async () => {
    expect(Object.keys(BUILTIN_TOOLS)).toEqual([...BUILTIN_NAMES]);
    const pool = new WorkerPool({ ...defaultPoolOptions(), concurrency: 1 });
    try {
      for (const name of BUILTIN_NAMES) {
        expect(await describeModule(pool, builtinTool(name))).toEqual(BUILTIN_TOOLS[name]);
      }
    } finally {
      await pool.close();
    }
  });

  it('an opened engine lists them with their compiled modules, and its first bash call runs', async () => {
    const { engine } = await openEngine();
    expect(engine.tools()).toEqual(
      BUILTIN_NAMES.map((name) => ({
        ...BUILTIN_TOOLS[name],
        module: builtinTool(name),
        source: 'builtin',
      })),
    );
    const r = await engine.run('bash', { command: 'printf hi' });
    expect(r.status).toBe('success');
    expect(r.model).toContain('hi');
  });

  it('the light entry sluice/engine is the same Engine as the package root', async () => {
    const light = (await import('sluice/engine')) as { Engine: unknown };
    const root = (await import('sluice')) as { Engine: unknown };
    expect(light.Engine).toBe(root.Engine);
    expect(typeof light.Engine).toBe('function');
  });

  it('builtins: false registers none', async () => {
    const { engine } = await openEngine({ builtins: false });
    expect(engine.tools()).toEqual([]);
    expect(() => engine.call('bash', { command: 'true' })).toThrow(expect.objectContaining({ code: 'EUNKNOWNTOOL' }));
  });
});

describe('the early worker pool', () => {
  it('starts from plainly valid pool settings only; anything else waits for validation', () => {
    const d = defaultPoolOptions();
    expect(earlyPoolOptions({})).toEqual(d);
    expect(earlyPoolOptions({ concurrency: 3, minThreads: 0, workerHeapMb: 64 })).toEqual({
      ...d,
      concurrency: 3,
      minThreads: 0,
      maxOldGenerationSizeMb: 64,
    });
    for (const bad of [
      { concurrency: 0 },
      { concurrency: 1025 },
      { concurrency: 2.5 },
      { concurrency: '4' },
      { minThreads: -1 },
      { workerHeapMb: 15 },
      { workerHeapMb: Number.NaN },
    ]) {
      expect(earlyPoolOptions(bad)).toBeUndefined();
    }
  });

  it('uses the settings it was given: a call runs with concurrency 2 and a single warm thread', async () => {
    const { engine } = await openEngine({ concurrency: 2, minThreads: 1, workerHeapMb: 64 });
    expect(engine.options).toMatchObject({ concurrency: 2, minThreads: 1, workerHeapMb: 64 });
    const r = await engine.run('bash', { command: 'true' });
    expect(r.status).toBe('success');
    expect(engine.threads).toBeLessThanOrEqual(2);
  });

  it('an option rejected after the pool started (EBADOPTION) leaves no worker thread behind', async () => {
    const dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-open-'));
    try {
      // Warm: the first open loads modules and starts V8's and libuv's own threads.
      await (await Engine.open({ store: join(dir, 'store'), cwd: dir })).close();
      const before = await settledThreads();
      await expect(Engine.open({ store: join(dir, 'store'), cwd: dir, window: 1 })).rejects.toMatchObject({
        code: 'EBADOPTION',
        details: { option: 'window' },
      });
      // Regression: a value JSON cannot show made the message itself throw a TypeError instead.
      await expect(
        Engine.open({ store: join(dir, 'store'), cwd: dir, concurrency: 1n as unknown as number }),
      ).rejects.toMatchObject({ code: 'EBADOPTION', details: { option: 'concurrency' }, message: /got 1n/ });
      expect(await settledThreads()).toBeLessThanOrEqual(before);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  it('a store that cannot be opened fails the open and leaves no worker thread behind', async () => {
    const dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-open-'));
    try {
      await (await Engine.open({ store: join(dir, 'store'), cwd: dir })).close();
      const before = await settledThreads();
      // A regular file where the store's directory should be.
      await fsp.writeFile(join(dir, 'file'), 'x');
      const err = await Engine.open({ store: join(dir, 'file', 'store'), cwd: dir }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'EDISK', details: { errno: 'ENOTDIR' } });
      expect(await settledThreads()).toBeLessThanOrEqual(before);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});
