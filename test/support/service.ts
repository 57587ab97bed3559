/**
 * An external service a run's suites share, started and stopped by the
 * project's own scripts (`.ci/s3-up.sh` and `.ci/s3-down.sh` for Ceph,
 * `.ci/queue-up.sh` and `.ci/queue-down.sh` for NATS) when the environment
 * names none. The first test file that asks starts it; files asking
 * meanwhile (other vitest workers) wait for it; the global teardown stops
 * it. No client SDK here: the global setup loads this module.
 */
import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { reportNotRun, testRunDir } from './run.js';

/** How one kind of service is started and found. */
export interface ScriptedService {
  /** Its directory under the run's (`RUN/s3`), and the prefix of its lock and failure files there. */
  readonly key: string;
  /** What it is, for messages ("Ceph", "nats-server"). */
  readonly what: string;
  /** The start script, `.ci/...-up.sh`, and its stop script, both relative to the repository root. */
  readonly up: string;
  readonly down: string;
  /** The env file the start script writes in its directory on success. */
  readonly envFile: string;
  /** Bound on a start. */
  readonly startTimeoutMs: number;
}

/** A started service's variables (its env file), or why none could be started. */
export type ServiceResult = { env: Record<string, string> } | { reason: string };

/** The absolute path of a script named relative to the repository root. */
export const scriptPath = (relative: string) => fileURLToPath(new URL(`../../${relative}`, import.meta.url));

/** The `export NAME=value` lines of an env file written by an up script, as a record. */
export function parseEnvFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^export ([A-Z0-9_]+)=(.*)$/.exec(line);
    if (m) env[m[1]!] = m[2]!;
  }
  return env;
}

/** Runs `bash SCRIPT DIR`; its exit code and stderr. */
export function runScript(relative: string, dir: string, timeout: number): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', [scriptPath(relative), dir], { timeout, killSignal: 'SIGTERM' }, (err, _stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stderr });
    });
  });
}

/** Starts `svc` in `dir` (which its script creates) and returns its variables or the script's reason. */
export async function startService(svc: ScriptedService, dir: string): Promise<ServiceResult> {
  const { code, stderr } = await runScript(svc.up, dir, svc.startTimeoutMs);
  if (code === 0) return { env: parseEnvFile(await fsp.readFile(join(dir, svc.envFile), 'utf8')) };
  // The script's first own line (`s3-up: ...`) says what went wrong; the rest is daemon logs.
  const prefix = `${svc.up.replace(/^.*\//, '').replace(/\.sh$/, '')}: `;
  const first = stderr.split('\n').find((l) => l.startsWith(prefix));
  const why = first ? first.slice(prefix.length) : `exit ${code}`;
  return { reason: code === 3 ? why : `${svc.up} failed: ${why} (run it by hand to see the daemons' logs)` };
}

/** Stops `svc` in `dir` (what its stop script removes, it removes); nothing to do when there is none. */
export async function stopService(svc: ScriptedService, dir: string): Promise<void> {
  const { code, stderr } = await runScript(svc.down, dir, 30_000);
  if (code !== 0) throw new Error(`${svc.down} ${dir} failed (exit ${code}): ${stderr.trim()}`);
}

/** Where the run's instance of `svc` lives. */
export const serviceDir = (svc: ScriptedService, runDir: string) => join(runDir, svc.key);

/**
 * The run's instance of `svc`: started by the first caller of any process
 * of the run (an atomic mkdir elects it), awaited by the others through the
 * files it leaves (the env file on success, KEY.failed with the reason
 * otherwise).
 */
export async function sharedService(svc: ScriptedService, runDir: string): Promise<ServiceResult> {
  const dir = serviceDir(svc, runDir);
  const failed = join(runDir, `${svc.key}.failed`);
  const elected = await fsp.mkdir(join(runDir, `${svc.key}.lock`)).then(
    () => true,
    (e: NodeJS.ErrnoException) => {
      if (e.code === 'EEXIST') return false;
      throw e;
    },
  );
  if (elected) {
    // Whatever happens, the waiting files must learn it, or they wait out their bound.
    const result = await startService(svc, dir).catch(
      (e: unknown): ServiceResult => ({
        reason: `starting ${svc.what} threw: ${e instanceof Error ? e.message : String(e)}`,
      }),
    );
    if ('reason' in result) await fsp.writeFile(failed, result.reason);
    return result;
  }
  const deadline = Date.now() + svc.startTimeoutMs + 10_000;
  while (Date.now() < deadline) {
    const env = await fsp.readFile(join(dir, svc.envFile), 'utf8').catch(() => undefined);
    if (env !== undefined) return { env: parseEnvFile(env) };
    const reason = await fsp.readFile(failed, 'utf8').catch(() => undefined);
    if (reason !== undefined) return { reason };
    await new Promise((r) => setTimeout(r, 100));
  }
  return { reason: `another test file's ${svc.what} start did not finish within ${svc.startTimeoutMs / 1000} s` };
}

/** Stops the run's instance of `svc` if one was started (global teardown). */
export async function stopSharedService(svc: ScriptedService, runDir: string): Promise<void> {
  await stopService(svc, serviceDir(svc, runDir));
}

/** How a suite kind finds its service: the variables that name one or say why there is none. */
export interface ServiceGate<T> {
  /** "S3 suites", "queue suites": the start of the line printed when they did not run. */
  readonly suites: string;
  /** The variable .ci/run sets to the reason when it could not have the service. */
  readonly unavailable: string;
  /** The variable that, set, names a running service (then `fromEnv` reads it). */
  readonly present: string;
  /** The service the variables describe (it may throw on a broken setup: fail, do not skip). */
  fromEnv(env: Record<string, string | undefined>): T;
  /** What this process takes from the run's own instance's variables (so children reach it too). */
  adopt?(env: Record<string, string>): void;
}

/**
 * The service of this run for `gate`, or undefined with the reason recorded
 * (printed once at the end of the run), in this order: the `unavailable`
 * variable's reason; the service the `present` variable names; the run's own
 * instance, started through the scripts of `svc`.
 */
export async function resolveService<T>(svc: ScriptedService, gate: ServiceGate<T>): Promise<T | undefined> {
  const unavailable = process.env[gate.unavailable];
  if (unavailable) {
    await reportNotRun(gate.suites, unavailable);
    return undefined;
  }
  if (process.env[gate.present]) return gate.fromEnv(process.env);
  const runDir = testRunDir();
  if (!runDir) {
    await reportNotRun(gate.suites, `${gate.present} is not set and this vitest run has no global setup`);
    return undefined;
  }
  const started = await sharedService(svc, runDir);
  if ('reason' in started) {
    await reportNotRun(gate.suites, started.reason);
    return undefined;
  }
  gate.adopt?.(started.env);
  return gate.fromEnv(started.env);
}
