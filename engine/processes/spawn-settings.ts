/**
 * The environment variables that choose how workers start tool processes
 * (workers/spawner.ts), checked when an engine opens: a typo would otherwise
 * pick a default silently, or fail in each thread at its first call
 * (docs/operations.md, "The spawn helper").
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
