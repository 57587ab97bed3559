/** Where the compiled worker code lives: threads run JavaScript, so piscina gets dist/ even when the engine runs from sources under vitest. */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../package-root.js';

/** Path of a compiled file under dist/, e.g. `workers/entry.js`. */
export function distPath(relative: string): string {
  const p = join(packageRoot(), 'dist', relative);
  if (!existsSync(p)) {
    throw new Error(`sluice is not built: ${p} is missing (run npm run build)`);
  }
  return p;
}

/** The file piscina loads in each thread (it imports `workers/entry.js`). */
export function workerEntry(): string {
  return distPath('workers/entry-loader.cjs');
}
