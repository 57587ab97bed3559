/**
 * An isolated environment for fuzzing through the real engine: the process
 * runs with its working directory and HOME set to fresh empty directories
 * (so a read of `~/x` or `./x`, a relative path, a stray file write, would
 * all land there), the engine's store is in a third directory, and at the end
 * the test asserts that cwd and HOME are still empty and that the store
 * holds nothing but what the test put there.
 */
import { join } from 'node:path';
import { expect } from 'vitest';
import { Engine, type EngineOpenOptions } from '../../engine/engine.js';
import { entriesUnder, expectNoLeftovers, makeTempDir, removeDir } from './invariants.js';

/** An engine in an isolated process environment; call {@link Isolated.close} at the end. */
export interface Isolated {
  engine: Engine;
  /** The working directory (of the process and of the engine's tools). */
  cwd: string;
  /** $HOME while the engine runs. */
  home: string;
  /** The store directory. */
  storeDir: string;
  /** Asserts cwd and HOME are empty and the store has no temporary files or pins. */
  expectUntouched(): Promise<void>;
  /** Closes the engine, restores cwd and HOME, removes the directories. */
  close(): Promise<void>;
}

/** Opens an engine with cwd and HOME set to fresh empty directories (vitest's forks pool allows chdir). */
export async function isolatedEngine(options: EngineOpenOptions = {}): Promise<Isolated> {
  const base = await makeTempDir('sluice-iso-');
  const cwd = join(base, 'cwd');
  const home = join(base, 'home');
  const storeDir = join(base, 'store');
  const { mkdir } = await import('node:fs/promises');
  await mkdir(cwd);
  await mkdir(home);
  const oldCwd = process.cwd();
  const oldHome = process.env.HOME;
  process.chdir(cwd);
  // Workers copy process.env when they start: set before the engine (and its first worker) exists.
  process.env.HOME = home;
  let engine: Engine;
  try {
    engine = await Engine.open({ store: storeDir, cwd, ...options });
  } catch (err) {
    process.chdir(oldCwd);
    process.env.HOME = oldHome;
    await removeDir(base);
    throw err;
  }
  return {
    engine,
    cwd,
    home,
    storeDir,
    async expectUntouched() {
      expect(await entriesUnder(cwd), 'cwd').toEqual([]);
      expect(await entriesUnder(home), 'HOME').toEqual([]);
      await expectNoLeftovers(engine.store);
    },
    async close() {
      await engine.close();
      process.chdir(oldCwd);
      if (oldHome === undefined) delete process.env.HOME;
      else process.env.HOME = oldHome;
      await removeDir(base);
    },
  };
}
