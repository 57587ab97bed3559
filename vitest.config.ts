import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The run's shared directory: the S3 service some suites start, and the one-line reasons of suites that did not run.
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Worker threads and child processes per test: two files at a time on a 2-core machine.
    maxWorkers: 2,
    pool: 'forks',
  },
});
