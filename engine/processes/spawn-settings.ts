/**
 * The environment variables that choose how worker threads start tool
 * processes (workers/spawner.ts), checked when an engine opens: a typo there
 * would otherwise pick a default without a word, or leave each thread to
 * find out at its first call (a relative `SLUICE_SPAWN_PYTHON` would be
 * looked up on PATH by sh, a missing one print "not found" on the engine's
 * stderr).
 *
 * - `SLUICE_SPAWN_HELPER`: unset, empty or `1` (the default: a helper once
 *   it is up), `0` (never a helper), `wait` (every spawn through the helper).
 * - `SLUICE_SPAWN_PYTHON`: unset (a system Python if there is one), empty
 *   (the Node helper), or the absolute path of an executable file.
 */
import { accessSync, constants, statSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { BadOptionError } from '../protocol/errors.js';

const HELPER_MODES = ['', '1', '0', 'wait'];

/** Throws {@link BadOptionError} (EBADOPTION) naming the variable when either has a value the spawner cannot use. */
export function assertSpawnSettings(env: NodeJS.ProcessEnv = process.env): void {
  const mode = env.SLUICE_SPAWN_HELPER;
  if (mode !== undefined && !HELPER_MODES.includes(mode)) {
    throw new BadOptionError(`SLUICE_SPAWN_HELPER must be 0, 1 or wait (or unset), not ${JSON.stringify(mode)}`, {
      variable: 'SLUICE_SPAWN_HELPER',
      value: mode,
    });
  }
  const python = env.SLUICE_SPAWN_PYTHON;
  if (python === undefined || python === '') return;
  const problem = !isAbsolute(python) ? 'is not an absolute path' : executableProblem(python);
  if (problem !== undefined) {
    throw new BadOptionError(`SLUICE_SPAWN_PYTHON ${JSON.stringify(python)} ${problem}`, {
      variable: 'SLUICE_SPAWN_PYTHON',
      value: python,
    });
  }
}

function executableProblem(path: string): string | undefined {
  try {
    if (!statSync(path).isFile()) return 'is not a file';
    accessSync(path, constants.X_OK);
    return undefined;
  } catch (err) {
    return `cannot be run (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
  }
}
