/** RFC 4918 conformance: litmus's basic, copymove, props, locks and http suites against /dav. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { parseLitmus, requireTool, run } from './clients/webdav.js';

let ts: TestServer;

beforeAll(async () => {
  requireTool('litmus', 'litmus');
  ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
});
afterAll(async () => {
  await ts?.close();
});

describe('litmus', () => {
  it('passes basic copymove props locks http with no failures', async () => {
    const r = await run('litmus', [`${ts.url}/dav/`, 'admin', ADMIN_PASSWORD], {
      env: { ...process.env, TESTS: 'basic copymove props locks http' },
      timeoutMs: 180_000,
      cwd: ts.dataDir, // litmus writes debug.log into the working directory
    });
    const { suites, warnings, failures } = parseLitmus(r.stdout);
    if (warnings.length) console.warn(`litmus warnings:\n${warnings.join('\n')}`);
    expect(failures, r.stdout).toEqual([]);
    expect(suites.map((s) => s.name)).toEqual(['basic', 'copymove', 'props', 'locks', 'http']);
    for (const s of suites) expect(s, r.stdout).toMatchObject({ failed: 0, passed: s.run });
    expect(r.code).toBe(0);
  }, 200_000);
});
