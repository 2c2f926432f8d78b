import { defineConfig } from 'vitest/config';

// Listener tests start real servers and real clients (sftp, litmus, rclone): forks isolate them,
// and generous timeouts absorb the shared, noisy 2-core machines. Two workers on those machines (vitest
// runs cores − 1, one, by default): most of a test's time is spent waiting on its servers and
// clients, and one worker at a time took the suite to 27 minutes.
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'protocols/**/*.test.ts', 'drivers/**/*.test.ts', 'test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    minWorkers: 1,
    // Memory bounds are checked on live buffers, after a forced collection (test/sftp-probe-edges.test.ts).
    poolOptions: { forks: { execArgv: ['--expose-gc'] } },
    testTimeout: 120_000,
    hookTimeout: 120_000,
    reporters: ['default'],
    // SFTP connections overwrite their reused read buffer after each read, so a view ssh2 keeps
    // into it shows up as corrupted data in the tests (protocols/sftp/reused-reads.ts).
    env: { TREEGATE_DEBUG_POISON_READS: '1' },
  },
});
