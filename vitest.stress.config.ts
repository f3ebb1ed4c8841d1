import { defineConfig } from 'vitest/config';

// The stress suite (`npm run test:stress`): real daemons under bulk traffic, load and faults.
// Its files end in .stress.ts, so the normal suite (test/**/*.test.ts) never picks them up.
export default defineConfig({
  test: {
    include: ['test/stress/**/*.stress.ts'],
    setupFiles: ['test/setup.ts'],
    // Deadlines, not expectations: they leave room for a machine loaded several times over.
    testTimeout: 300_000,
    hookTimeout: 180_000,
    pool: 'forks',
    // One file at a time: each loads both cores on its own, and the latency figures stay its own.
    fileParallelism: false,
    // CI prints one summary line per suite from this report.
    reporters: ['default', ['json', { outputFile: '.vitest-tmp/stress-report.json' }]],
  },
});
