/**
 * vitest globalSetup: makes the run's shared directory (test/support/run.ts)
 * and, at the end, stops the Ceph cluster and the queue server test files
 * may have started (test/support/service.ts), prints once each "... suites did not run: why"
 * line, and removes the directory. A run killed before its teardown is
 * cleaned up by test/support/run-reaper.ts.
 */
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { CEPH } from './ceph.js';
import { NATS } from './queue.js';
import { notRunLines } from './run.js';
import { startRunReaper } from './run-reaper.js';
import { stopSharedService } from './service.js';

/** Sets the run up; returns its teardown. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Short and under the system temp dir: the cluster's admin sockets live below it.
  const dir = await fsp.mkdtemp(join(tmpdir(), 'sluice-run-'));
  project.provide('sluiceTestRunDir', dir);
  // A runner killed before its teardown still stops the services and removes the directory.
  const disarm = startRunReaper(dir);
  return async () => {
    try {
      await Promise.all([stopSharedService(CEPH, dir), stopSharedService(NATS, dir)]);
      for (const line of await notRunLines(dir)) console.log(line);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
      disarm();
    }
  };
}
