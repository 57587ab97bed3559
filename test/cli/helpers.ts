/**
 * Running the built `sluice` command as a real process in a mkdtemp
 * directory (removed by {@link cleanupDirs}).
 */
import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The built CLI. */
export const MAIN = join(ROOT, 'dist', 'cli', 'main.js');

const dirs: string[] = [];

/** A new temporary directory for one test. */
export async function tempDir(): Promise<string> {
  const d = await fsp.mkdtemp(join(tmpdir(), 'sluice-cli-'));
  dirs.push(d);
  return d;
}

/** Removes every directory of the test and checks that it is gone (use in afterEach). */
export async function cleanupDirs(): Promise<void> {
  for (const d of dirs.splice(0)) {
    await fsp.rm(d, { recursive: true, force: true });
    await fsp.stat(d).then(
      () => {
        throw new Error(`${d} was not removed`);
      },
      () => {},
    );
  }
}

/** What a finished `sluice` process left. */
export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `sluice args...` in `cwd` with $SLUICE_STORE at `<cwd>/store` (unless `env` says otherwise). */
export function sluice(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<Ran> {
  const child = spawn(process.execPath, [MAIN, ...args], {
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, SLUICE_STORE: join(cwd, 'store'), ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d;
  });
  return new Promise((res) => child.on('close', (code) => res({ code, stdout, stderr })));
}
