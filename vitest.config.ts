import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/setup.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: integration files start real daemons and processes.
    maxWorkers: 2,
    // The JSON report lets CI print one plain `N passed, N failed` line.
    reporters: ['default', ['json', { outputFile: '.vitest-report.json' }]],
  },
});
