/**
 * Security probe: the login tokens' HMAC key (`jwt_secret`) was taken as given. The annotated
 * example config (config/example.config.json, named in the README) carries a placeholder text as
 * its jwt_secret: copied as DATA/config.json, the server started with that public text as its key,
 * and anyone could sign an admin token. A short secret (`TREEGATE_JWT_SECRET=changeme`) is as bad:
 * every token a user holds lets it be brute-forced offline. Such values are now refused at start
 * with a clear error, and the example leaves the secret empty (generated on first start).
 */
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SignJWT } from 'jose';
import { startTestServer } from './harness.js';
import { loadConfig } from '../src/config.js';

const PLACEHOLDER = '<generated on first start; changing it logs everyone out>';
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
const tempDir = async () => {
  const d = await mkdtemp(join(tmpdir(), 'treegate-jwt-'));
  dirs.push(d);
  return d;
};

/** An admin token signed with `secret`, as an attacker who knows it would make. */
function forge(secret: string, pwdTs: number): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ username: 'admin', pwd_ts: pwdTs, uid: 1 })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setJti('forged').setIssuedAt(now).setNotBefore(now).setExpirationTime(now + 3600)
    .sign(new TextEncoder().encode(secret));
}

describe('jwt_secret', () => {
  it('the placeholder of the example config is refused, not used as the key of admin tokens', async () => {
    const dataDir = await tempDir();
    // The example as shipped before the fix, whatever the example holds now.
    await writeFile(join(dataDir, 'config.json'), JSON.stringify({ jwt_secret: PLACEHOLDER, trusted_proxies: ['127.0.0.1'] }));
    let outcome: string;
    try {
      const s = await startTestServer({ dataDir });
      try {
        const admin = (await s.running.core.accounts.admin())!;
        const r = await s.api<{ username: string }>('/api/me', { token: await forge(PLACEHOLDER, admin.pwd_ts) });
        outcome = `started; a forged admin token answered ${r.code} as ${r.data?.username}`;
      } finally {
        await s.close();
      }
    } catch (e) {
      outcome = `refused: ${(e as Error).message}`;
    }
    expect(outcome).toMatch(/^refused: jwt_secret \(from .*config\.json\): .*placeholder/);
    expect(outcome).not.toContain(PLACEHOLDER);
  });

  it('the example config as shipped starts with a generated secret', async () => {
    const dataDir = await tempDir();
    await copyFile(join(import.meta.dirname, '..', 'config', 'example.config.json'), join(dataDir, 'config.json'));
    const cfg = await loadConfig({ data: dataDir }, {});
    expect(cfg.jwt_secret.length).toBeGreaterThanOrEqual(32);
    expect(cfg.jwt_secret).not.toContain('<');
  });

  it('a secret shorter than 16 characters is refused, from the environment too, without echoing it', async () => {
    const dataDir = await tempDir();
    await expect(loadConfig({ data: dataDir }, { TREEGATE_JWT_SECRET: 'changeme' })).rejects.toThrow(/^jwt_secret \(from TREEGATE_JWT_SECRET\): must be at least 16 characters$/);
    await expect(loadConfig({ data: dataDir }, { TREEGATE_JWT_SECRET: 'x'.repeat(16) })).resolves.toMatchObject({ jwt_secret: 'x'.repeat(16) });
  });
});
