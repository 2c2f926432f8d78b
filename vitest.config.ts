import { defineConfig } from 'vitest/config';

// Listener tests start real servers and real clients (sftp, litmus, rclone): forks isolate them,
// and generous timeouts absorb the shared, noisy 2-core machines.
export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'protocols/**/*.test.ts', 'drivers/**/*.test.ts', 'test/**/*.test.ts'],
    pool: 'forks',
    // Memory bounds are checked on live buffers, after a forced collection (test/sftp-probe-edges.test.ts).
    poolOptions: { forks: { execArgv: ['--expose-gc'] } },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    // SFTP connections overwrite their reused read buffer after each read, so a view ssh2 keeps
    // into it shows up as corrupted data in the tests (protocols/sftp/reused-reads.ts).
    env: { TREEGATE_DEBUG_POISON_READS: '1' },
  },
});
