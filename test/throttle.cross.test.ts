/**
 * Login throttling is one per-IP counter shared by REST, WebDAV and SFTP (decision 3), and
 * X-Forwarded-For only counts when the peer is a configured proxy. Also: oversized JSON bodies.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davRequest } from './clients/webdav.js';
import { withSsh2Sftp } from './clients/sftp.js';

const THROTTLED = 'Too many unsuccessful sign-in attempts have been made using an incorrect username or password, Try again later.';

let ts: TestServer | undefined;
afterEach(async () => {
  await ts?.close();
  ts = undefined;
});

const restLogin = (s: TestServer, password: string, headers: Record<string, string> = {}) =>
  s.api('/api/auth/login', { body: { username: 'admin', password }, headers });

describe('shared login throttling', () => {
  it('failures over WebDAV and SFTP lock the IP out of REST too', async () => {
    ts = await startTestServer();
    for (let i = 0; i < 3; i++) {
      const r = await davRequest(ts.url, 'PROPFIND', '/dav/', { user: 'admin', password: `bad-${i}`, headers: { depth: '0' } });
      expect(r.status).toBe(401);
    }
    for (let i = 0; i < 2; i++) {
      await expect(withSsh2Sftp({ port: ts.sftpPort, username: 'admin', password: `bad-sftp-${i}` }, async () => 'in')).rejects.toThrow();
    }
    // The sixth attempt, with the right password and over another protocol, is refused.
    expect(await restLogin(ts, ADMIN_PASSWORD)).toEqual({ code: 429, message: THROTTLED, data: null });
    const dav = await davRequest(ts.url, 'PROPFIND', '/dav/', { user: 'admin', password: ADMIN_PASSWORD, headers: { depth: '0' } });
    expect(dav.status).toBe(429);
    await expect(withSsh2Sftp({ port: ts.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, async () => 'in')).rejects.toThrow();
  });

  it('ignores X-Forwarded-For from a peer that is not a trusted proxy', async () => {
    ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
    for (let i = 0; i < 5; i++) expect((await restLogin(ts, `bad-${i}`, { 'x-forwarded-for': `203.0.113.${i}` })).code).toBe(400);
    // Rotating the header does not give a fresh counter: the lock is on the real peer.
    expect((await restLogin(ts, ADMIN_PASSWORD, { 'x-forwarded-for': '203.0.113.99' })).code).toBe(429);
  });

  it('uses X-Forwarded-For when the peer is a trusted proxy', async () => {
    ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false', TREEGATE_TRUSTED_PROXIES: '127.0.0.1' } });
    for (let i = 0; i < 5; i++) expect((await restLogin(ts, `bad-${i}`, { 'x-forwarded-for': '198.51.100.7' })).code).toBe(400);
    expect((await restLogin(ts, ADMIN_PASSWORD, { 'x-forwarded-for': '198.51.100.7' })).code).toBe(429);
    // Another client behind the same proxy is not locked out.
    expect((await restLogin(ts, ADMIN_PASSWORD, { 'x-forwarded-for': '198.51.100.8' })).code).toBe(200);
  });

  it.each(['loopback', '127.0.0.0/8'])('WebDAV reads trusted_proxies as REST does (%s): one client, one counter, others behind the proxy unaffected', async (trusted) => {
    ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false', TREEGATE_TRUSTED_PROXIES: trusted } });
    const dav = (password: string, client: string) =>
      davRequest(ts!.url, 'PROPFIND', '/dav/', { user: 'admin', password, headers: { depth: '0', 'x-forwarded-for': client } });
    for (let i = 0; i < 3; i++) expect((await dav(`bad-${i}`, '198.51.100.7')).status).toBe(401);
    for (let i = 0; i < 2; i++) expect((await restLogin(ts, `bad-rest-${i}`, { 'x-forwarded-for': '198.51.100.7' })).code).toBe(400);
    expect((await restLogin(ts, ADMIN_PASSWORD, { 'x-forwarded-for': '198.51.100.7' })).code).toBe(429);
    expect((await dav(ADMIN_PASSWORD, '198.51.100.7')).status).toBe(429);
    expect((await dav(ADMIN_PASSWORD, '198.51.100.8')).status).toBe(207);
  });
});

describe('oversized bodies', () => {
  it('answers a JSON body over max_json_body with an envelope and changes nothing', async () => {
    ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
    const token = await ts.login();
    const huge = JSON.stringify({ path: '/big', padding: 'x'.repeat(2 * 1024 * 1024) });
    const r = await ts.api('/api/fs/mkdir', { token, body: huge, headers: { 'content-type': 'application/json' } });
    expect(r).toEqual({ code: 400, message: 'request body too large', data: null });
    const list = await ts.api<{ content: Array<{ name: string }> }>('/api/fs/list', { token, body: { path: '/' } });
    expect(list.data!.content.map((e) => e.name)).not.toContain('big');
  });
});
