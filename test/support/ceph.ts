/**
 * The test run's own Ceph S3 service, started through the same scripts CI
 * uses (`.ci/s3-up.sh`, `.ci/s3-down.sh`) when the environment names no
 * service (test/support/service.ts shares the start among the run's
 * files). No AWS SDK here: the global setup loads this module too.
 */
import type { ScriptedService } from './service.js';

/** The Ceph service: ~3 s is a usual start (docs in the script); 2 minutes is a broken machine. */
export const CEPH: ScriptedService = {
  key: 's3',
  what: 'Ceph',
  up: '.ci/s3-up.sh',
  down: '.ci/s3-down.sh',
  envFile: 's3.env',
  startTimeoutMs: 120_000,
};
