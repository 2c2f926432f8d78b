/**
 * AList's WebDAV takes `Authorization: Bearer <the admin API token>` (setting `token`) as the admin,
 * so scripts that hold that token reach WebDAV with it as they reach the REST API. treegate answered
 * 401 to it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { putFile } from './fs-helpers.js';
import { davRequest } from './clients/webdav.js';

let s: TestServer;
let apiToken: string;

beforeAll(async () => {
  s = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  const admin = await s.login();
  expect((await putFile(s, admin, '/bearer.txt', 'via the api token')).code).toBe(200);
  const r = await s.api<{ value: string }>('/api/admin/setting/get?key=token', { token: admin });
  apiToken = r.data!.value;
  expect(apiToken.length).toBeGreaterThan(20);
});
afterAll(async () => {
  await s?.close();
});

describe('WebDAV with the admin API token', () => {
  it('Bearer <token> is the admin: reads and writes', async () => {
    const headers = { authorization: `Bearer ${apiToken}` };
    const get = await davRequest(s.url, 'GET', '/dav/bearer.txt', { headers });
    expect([get.status, get.body]).toEqual([200, 'via the api token']);
    const put = await davRequest(s.url, 'PUT', '/dav/bearer-put.txt', { headers, body: 'written' });
    expect(put.status).toBe(201);
    const list = await davRequest(s.url, 'PROPFIND', '/dav/', { headers: { ...headers, depth: '1' } });
    expect(list.status).toBe(207);
    expect(list.body).toContain('bearer-put.txt');
  });

  it('a wrong token, or a user token (JWT) as Bearer, is refused with the Basic challenge', async () => {
    for (const token of [`${apiToken}x`, await s.login()]) {
      const r = await davRequest(s.url, 'GET', '/dav/bearer.txt', { headers: { authorization: `Bearer ${token}` } });
      expect(r.status).toBe(401);
      expect(String(r.headers['www-authenticate'])).toMatch(/^Basic /);
    }
  });
});
