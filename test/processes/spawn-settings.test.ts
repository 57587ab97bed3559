/**
 * The spawner's environment variables are checked when an engine opens
 * (engine/processes/spawn-settings.ts): a value it cannot use is EBADOPTION
 * naming the variable, before anything is created.
 */
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Engine } from '../../engine/index.js';
import { assertSpawnSettings } from '../../engine/processes/spawn-settings.js';

const saved = { helper: process.env.SLUICE_SPAWN_HELPER, python: process.env.SLUICE_SPAWN_PYTHON };
afterEach(() => {
  for (const [name, value] of [
    ['SLUICE_SPAWN_HELPER', saved.helper],
    ['SLUICE_SPAWN_PYTHON', saved.python],
  ] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

function problem(env: NodeJS.ProcessEnv): unknown {
  try {
    assertSpawnSettings(env);
    return undefined;
  } catch (err) {
    return err;
  }
}

describe('the spawn settings', () => {
  it('accept the documented values', () => {
    for (const mode of [undefined, '', '0', '1', 'wait'])
      expect(problem({ SLUICE_SPAWN_HELPER: mode })).toBeUndefined();
    for (const python of [undefined, '', process.execPath])
      expect(problem({ SLUICE_SPAWN_PYTHON: python })).toBeUndefined();
  });

  it('refuse anything else with EBADOPTION naming the variable and the value', async () => {
    const dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-spawn-settings-'));
    const file = join(dir, 'not-executable');
    await fsp.writeFile(file, '');
    try {
      const cases: [NodeJS.ProcessEnv, string, RegExp][] = [
        [{ SLUICE_SPAWN_HELPER: 'yes' }, 'SLUICE_SPAWN_HELPER', /must be 0, 1 or wait/],
        [{ SLUICE_SPAWN_PYTHON: 'python3' }, 'SLUICE_SPAWN_PYTHON', /is not an absolute path/],
        [{ SLUICE_SPAWN_PYTHON: join(dir, 'missing') }, 'SLUICE_SPAWN_PYTHON', /cannot be run \(ENOENT\)/],
        [{ SLUICE_SPAWN_PYTHON: dir }, 'SLUICE_SPAWN_PYTHON', /is not a file/],
        [{ SLUICE_SPAWN_PYTHON: file }, 'SLUICE_SPAWN_PYTHON', /cannot be run \(EACCES\)/],
      ];
      for (const [env, variable, message] of cases) {
        const err = problem(env) as { code?: string; message: string; details?: Record<string, unknown> };
        expect(err).toMatchObject({ code: 'EBADOPTION', details: { variable, value: env[variable] } });
        expect(err.message).toMatch(message);
      }
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  it('stop an engine from opening, and nothing is created', async () => {
    const dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-spawn-settings-'));
    try {
      process.env.SLUICE_SPAWN_PYTHON = 'python3';
      await expect(Engine.open({ store: join(dir, 'store'), cwd: dir })).rejects.toMatchObject({
        code: 'EBADOPTION',
        details: { variable: 'SLUICE_SPAWN_PYTHON', value: 'python3' },
      });
      expect(await fsp.readdir(dir)).toEqual([]);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});
