import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Worker threads and child processes per test: two files at a time on a 2-core machine.
    maxWorkers: 2,
    pool: 'forks',
  },
});
