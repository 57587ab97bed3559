/**
 * The test run's own Ceph S3 service, started through the same scripts CI
 * uses (`.ci/s3-up.sh`, `.ci/s3-down.sh`) when the environment names no
 * service. The first test file that asks starts it; files asking meanwhile
 * (other vitest workers) wait for it; the global teardown stops it. No AWS
 * SDK here: the global setup loads this module too.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const UP = fileURLToPath(new URL('../../.ci/s3-up.sh', import.meta.url));
const DOWN = fileURLToPath(new URL('../../.ci/s3-down.sh', import.meta.url));
/** Bound on a start: ~3 s is usual (docs in the script); 2 minutes is a broken machine. */
const START_TIMEOUT_MS = 120_000;

/** A started cluster's variables (s3.env), or why none could be started. */
export type ClusterResult = { env: Record<string, string> } | { reason: string };

/** The `export NAME=value` lines of an env file written by s3-up.sh, as a record. */
export function parseEnvFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^export ([A-Z0-9_]+)=(.*)$/.exec(line);
    if (m) env[m[1]!] = m[2]!;
  }
  return env;
}

function run(script: string, dir: string, timeout: number): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', [script, dir], { timeout, killSignal: 'SIGTERM' }, (err, _stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stderr });
    });
  });
}

/** Starts a cluster in `dir` (which s3-up.sh creates) and returns its variables or the script's reason. */
export async function startCluster(dir: string): Promise<ClusterResult> {
  const { code, stderr } = await run(UP, dir, START_TIMEOUT_MS);
  if (code === 0) return { env: parseEnvFile(await fsp.readFile(join(dir, 's3.env'), 'utf8')) };
  // The script's first own line says what went wrong; the rest is daemon logs.
  const first = stderr.split('\n').find((l) => l.startsWith('s3-up: '));
  const why = first ? first.slice('s3-up: '.length) : `exit ${code}`;
  return { reason: code === 3 ? why : `.ci/s3-up.sh failed: ${why} (run it by hand to see the daemons' logs)` };
}

/** Stops the cluster in `dir` and removes `dir`; nothing to do when there is none. */
export async function stopCluster(dir: string): Promise<void> {
  const { code, stderr } = await run(DOWN, dir, 30_000);
  if (code !== 0) throw new Error(`.ci/s3-down.sh ${dir} failed (exit ${code}): ${stderr.trim()}`);
}

const clusterDir = (runDir: string) => join(runDir, 's3');
const failedFile = (runDir: string) => join(runDir, 's3.failed');

/**
 * The run's cluster: started by the first caller of any process of the run
 * (an atomic mkdir elects it), awaited by the others through the files it
 * leaves (s3.env on success, s3.failed with the reason otherwise).
 */
export async function sharedCluster(runDir: string): Promise<ClusterResult> {
  const elected = await fsp.mkdir(join(runDir, 's3.lock')).then(
    () => true,
    (e: NodeJS.ErrnoException) => {
      if (e.code === 'EEXIST') return false;
      throw e;
    },
  );
  if (elected) {
    // Whatever happens, the waiting files must learn it, or they wait out their bound.
    const result = await startCluster(clusterDir(runDir)).catch(
      (e: unknown): ClusterResult => ({ reason: `starting Ceph threw: ${e instanceof Error ? e.message : String(e)}` }),
    );
    if ('reason' in result) await fsp.writeFile(failedFile(runDir), result.reason);
    return result;
  }
  const deadline = Date.now() + START_TIMEOUT_MS + 10_000;
  while (Date.now() < deadline) {
    const env = await fsp.readFile(join(clusterDir(runDir), 's3.env'), 'utf8').catch(() => undefined);
    if (env !== undefined) return { env: parseEnvFile(env) };
    const reason = await fsp.readFile(failedFile(runDir), 'utf8').catch(() => undefined);
    if (reason !== undefined) return { reason };
    await new Promise((r) => setTimeout(r, 100));
  }
  return { reason: `another test file's Ceph start did not finish within ${START_TIMEOUT_MS / 1000} s` };
}

/** Stops the run's cluster if one was started (global teardown). */
export async function stopSharedCluster(runDir: string): Promise<void> {
  await stopCluster(clusterDir(runDir));
}
