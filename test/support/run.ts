/**
 * State shared by one vitest run's processes: a directory made by
 * `global-setup.ts` and handed to every test file through `inject`, where
 * suites that need an external part (a Ceph S3 service, Chromium) coordinate
 * and record why they did not run. The global teardown prints each such
 * reason once, however many test files skipped for it.
 */
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The run's shared directory (global-setup.ts). */
    sluiceTestRunDir: string;
  }
}

/** The run's shared directory, or undefined when the run has no global setup (another vitest config). */
export function testRunDir(): string | undefined {
  return inject('sluiceTestRunDir') || undefined;
}

const NOT_RUN = 'not-run';

/**
 * Records that `suites` (e.g. "S3 suites") did not run because of `reason`
 * (one line). The first record per suite kind wins; later ones are dropped,
 * so the end of the run prints the line once. Without a run directory the
 * line is printed at once instead.
 */
export async function reportNotRun(suites: string, reason: string): Promise<void> {
  const line = `${suites} did not run: ${reason.replace(/\s+/g, ' ').trim()}`;
  const dir = testRunDir();
  if (!dir) {
    console.warn(line);
    return;
  }
  await fsp.mkdir(join(dir, NOT_RUN), { recursive: true });
  const name = suites.toLowerCase().replace(/[^a-z0-9]+/g, '-');
  await fsp.writeFile(join(dir, NOT_RUN, name), line, { flag: 'wx' }).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'EEXIST') throw e;
  });
}

/** The lines {@link reportNotRun} recorded in run directory `dir`, sorted. */
export async function notRunLines(dir: string): Promise<string[]> {
  const names = await fsp.readdir(join(dir, NOT_RUN)).catch(() => [] as string[]);
  const lines = await Promise.all(names.map((n) => fsp.readFile(join(dir, NOT_RUN, n), 'utf8')));
  return lines.sort();
}
