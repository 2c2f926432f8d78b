/**
 * A port already in use (another treegate, or the NAS's own service on 5244/5222): the start stops
 * with one line naming the listener and its config keys (node's bare "listen EADDRINUSE … 0.0.0.0:5222"
 * named neither), exit 1, and undone: no owner marker left in DATA, nothing left listening.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { startTestServer } from './harness.js';
import { cliEnv, runCli } from './clients/process.js';

const dirs: string[] = [];
const blockers: Server[] = [];
afterEach(async () => {
  for (const b of blockers.splice(0)) await new Promise((r) => b.close(r));
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function temp(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'treegate-ops-listen-'));
  dirs.push(d);
  return d;
}

/** A loopback port held by someone else. */
async function busyPort(): Promise<number> {
  const s = createServer();
  blockers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return (s.address() as { port: number }).port;
}

it('HTTP port in use: refused naming http.port, the owner marker released', async () => {
  const data = await temp();
  const port = await busyPort();
  const err = await startTestServer({ dataDir: data, env: { TREEGATE_HTTP_PORT: String(port) } }).then(() => undefined, (e: unknown) => e);
  expect(String(err)).toMatch(new RegExp(`HTTP listener \\(http\\.address "127\\.0\\.0\\.1", http\\.port ${port}\\): cannot listen: the port is already in use`));
  expect(existsSync(join(data, 'server.pid'))).toBe(false);
});

it('SFTP port in use: refused naming sftp.port, the HTTP listener closed again', async () => {
  const data = await temp();
  const port = await busyPort();
  const err = await startTestServer({ dataDir: data, env: { TREEGATE_SFTP_PORT: String(port) } }).then(() => undefined, (e: unknown) => e);
  expect(String(err)).toMatch(new RegExp(`SFTP listener \\(sftp\\.address "127\\.0\\.0\\.1", sftp\\.port ${port}\\): cannot listen: the port is already in use`));
  expect(existsSync(join(data, 'server.pid'))).toBe(false);
  // The same DATA starts normally once the port is free.
  const s = await startTestServer({ dataDir: data });
  await s.close();
});

it('the built CLI: one stderr line, exit 1, no marker left', async () => {
  const data = join(await temp(), 'data');
  const port = await busyPort();
  const r = await runCli(['server', '--data', data], cliEnv({ TREEGATE_HTTP_PORT: String(port), TREEGATE_LOG_LEVEL: 'error' }));
  expect(r.code).toBe(1);
  expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^treegate: HTTP listener .*http\.port \d+\): cannot listen: the port is already in use/)]);
  expect(existsSync(join(data, 'server.pid'))).toBe(false);
});
