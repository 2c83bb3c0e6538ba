import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Tests leave nothing in the temp dir: a folder per run and per file, checked empty (test/setup/).
    globalSetup: ['test/setup/temp-run.ts'],
    setupFiles: ['test/setup/temp-check.ts'],
  },
});
