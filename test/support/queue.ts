/**
 * A real NATS JetStream server for the farm queue suites, and the one line
 * that says why they did not run where there is none.
 *
 * Where the server comes from, in order (test/support/service.ts):
 * 1. `SLUICE_TEST_QUEUE_UNAVAILABLE` set (by .ci/run when it could not
 *    install or start nats-server): no server, that variable is the reason.
 * 2. `SLUICE_TEST_QUEUE` set (by .ci/run, or by hand after
 *    `. DIR/queue.env`): that server, `nats://127.0.0.1:PORT/sluice`.
 * 3. Otherwise the run's own server, started by `.ci/queue-up.sh` for the
 *    first test file that asks and stopped at the end of the run.
 *
 * The suites read `SLUICE_TEST_QUEUE`, never `SLUICE_QUEUE`: that one is
 * sluice's own, and set in the tests' environment it would send every batch
 * through the queue.
 *
 * ```ts
 * const queue = await queueService();
 * describe.runIf(queue)('the farm queue', () => {
 *   it('...', async () => { const q = await FarmQueue.open(uniqueQueueUrl(queue!)); ... });
 * });
 * ```
 */
import { randomBytes } from 'node:crypto';
import { constants, promises as fsp } from 'node:fs';
import { delimiter, join } from 'node:path';
import { reportNotRun } from './run.js';
import { resolveService, type ScriptedService, type ServiceGate } from './service.js';

/** The queue server: a start takes ~0.5 s; a minute is a broken machine. */
export const NATS: ScriptedService = {
  key: 'queue',
  what: 'nats-server',
  up: '.ci/queue-up.sh',
  down: '.ci/queue-down.sh',
  envFile: 'queue.env',
  startTimeoutMs: 60_000,
};

/** A queue server the tests may use. */
export interface QueueService {
  /** `nats://127.0.0.1:PORT/NAME`: the server and a queue name (tests take their own names with {@link uniqueQueueUrl}). */
  readonly url: string;
}

const GATE: ServiceGate<QueueService> = {
  suites: 'queue suites',
  unavailable: 'SLUICE_TEST_QUEUE_UNAVAILABLE',
  present: 'SLUICE_TEST_QUEUE',
  fromEnv: (env) => ({ url: env.SLUICE_TEST_QUEUE! }),
};

let service: Promise<QueueService | undefined> | undefined;

/**
 * The queue server of this run, or undefined (the reason is recorded and
 * printed once at the end of the run). Call it at the top level of a test
 * file, `const queue = await queueService()`, and gate with
 * `describe.runIf(queue)`.
 */
export function queueService(): Promise<QueueService | undefined> {
  service ??= resolveService(NATS, GATE);
  return service;
}

/** The URL of a queue on `queue`'s server that no other test uses. */
export function uniqueQueueUrl(queue: QueueService, prefix = 't'): string {
  const url = new URL(queue.url);
  url.pathname = `/${prefix}-${randomBytes(6).toString('hex')}`;
  return url.href;
}

/**
 * True when this machine can run its own queue servers (nats-server on
 * PATH), for the suites that start and stop one themselves (a restart).
 * Where it cannot, the reason is recorded as the queue suites'.
 */
export async function ownServersPossible(): Promise<boolean> {
  if (!(await queueService())) return false;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const found = await fsp.access(join(dir, 'nats-server'), constants.X_OK).then(
      () => true,
      () => false,
    );
    if (found) return true;
  }
  await reportNotRun('queue suites', 'nats-server is not on PATH (Debian package nats-server)');
  return false;
}
