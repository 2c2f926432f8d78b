/** Helpers shared by the accounts/auth/settings tests (not a test file itself). */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';

/** A server without SFTP (these tests drive REST only), optionally on an existing data dir. */
export function startRest(opts: { env?: Record<string, string>; dataDir?: string } = {}): Promise<TestServer> {
  return startTestServer({ ...opts, env: { TREEGATE_SFTP_ENABLE: 'false', ...opts.env } });
}

/**
 * The file's server: started before its tests and logged in as admin (`ready` gets both), checked
 * after them for secrets in its logs (`secrets`, the admin token added), then closed.
 */
export function serveForFile(secrets: string[], ready: (s: TestServer, adminToken: string) => void): void {
  let server: TestServer | undefined;
  beforeAll(async () => {
    server = await startRest();
    const token = await server.login();
    secrets.push(token);
    ready(server, token);
  });
  afterAll(async () => {
    if (!server) return;
    expectLogsFree(server, secrets);
    await server.close();
  });
}

/** Create a general user through the admin API and return its id. */
export async function createUser(s: TestServer, adminToken: string, user: Record<string, unknown>): Promise<number> {
  const r = await s.api('/api/admin/user/create', { token: adminToken, body: { base_path: '/', permission: 0, disabled: false, ...user } });
  expect(r, JSON.stringify(r)).toMatchObject({ code: 200 });
  const list = await s.api<{ content: Array<{ id: number; username: string }> }>('/api/admin/user/list', { token: adminToken });
  const found = list.data!.content.find((u) => u.username === user.username);
  if (!found) throw new Error(`user ${String(user.username)} not listed`);
  return found.id;
}

export async function jwtSecretOf(dataDir: string): Promise<string> {
  return (JSON.parse(await readFile(join(dataDir, 'config.json'), 'utf8')) as { jwt_secret: string }).jwt_secret;
}

/** Log in successfully once: clears this IP's failure counter so later failures start from zero. */
export async function clearThrottle(s: TestServer): Promise<void> {
  await s.login();
}

/** No log line may contain any of the given secrets. */
export function expectLogsFree(s: TestServer, secrets: string[]): void {
  // The request log must exist, or this check would pass vacuously.
  expect(s.logs.some((l) => l.includes('"msg":"request"'))).toBe(true);
  for (const secret of secrets.filter((x) => x.length >= 6)) {
    const hit = s.logs.find((l) => l.includes(secret));
    expect(hit, `a log line contains a secret: ${hit}`).toBeUndefined();
  }
}
