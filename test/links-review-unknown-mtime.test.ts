/**
 * A file whose storage gives no modification time (drivers then say the Unix epoch: S3 objects
 * without LastModified, FTP listings without dates, WebDAV upstreams without getlastmodified; here a
 * Local file set to it). Go's ServeContent, through which AList serves /d, /p and WebDAV, sends no
 * Last-Modified for such a file and ignores the date preconditions. Compared as a date, any
 * If-Modified-Since answered 304: a client holding an old copy kept it after the file changed.
 */
import { utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { putFile } from './fs-helpers.js';
import { davRequest } from './clients/webdav.js';

let s: TestServer;
let token: string;
let sign: string;
const IMS = 'Sat, 01 Jan 2000 00:00:00 GMT';

beforeAll(async () => {
  s = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  token = await s.login();
  expect((await putFile(s, token, '/undated.txt', 'fresh content')).code).toBe(200);
  await utimes(join(s.dataDir, 'storage', 'undated.txt'), 0, 0);
  const g = await s.api<{ sign: string; modified: string }>('/api/fs/get', { token, body: { path: '/undated.txt' } });
  expect(new Date(g.data!.modified).getTime()).toBe(0);
  sign = g.data!.sign;
});
afterAll(async () => {
  await s?.close();
});

describe('a file with no known modification time', () => {
  it('/d: no Last-Modified, and If-Modified-Since / If-Unmodified-Since / a dated If-Range are not compared with it', async () => {
    const url = `${s.url}/d/undated.txt?sign=${encodeURIComponent(sign)}`;
    const plain = await fetch(url);
    expect(plain.status).toBe(200);
    expect(plain.headers.get('last-modified')).toBeNull();
    await plain.arrayBuffer();
    const ims = await fetch(url, { headers: { 'If-Modified-Since': IMS } });
    expect([ims.status, await ims.text()]).toEqual([200, 'fresh content']);
    const ius = await fetch(url, { headers: { 'If-Unmodified-Since': 'Thu, 01 Jan 1970 00:00:00 GMT' } });
    expect(ius.status).toBe(200);
    await ius.arrayBuffer();
    const epoch = 'Thu, 01 Jan 1970 00:00:00 GMT';
    const ranged = await fetch(url, { headers: { Range: 'bytes=0-4', 'If-Range': epoch } });
    expect([ranged.status, await ranged.text()]).toEqual([200, 'fresh content']);
  });

  it('WebDAV GET: no Last-Modified, and If-Modified-Since or a dated If-Range are not compared with it', async () => {
    const auth = { user: 'admin', password: ADMIN_PASSWORD };
    const plain = await davRequest(s.url, 'GET', '/dav/undated.txt', auth);
    expect(plain.status).toBe(200);
    expect(plain.headers['last-modified']).toBeUndefined();
    const ims = await davRequest(s.url, 'GET', '/dav/undated.txt', { ...auth, headers: { 'If-Modified-Since': IMS } });
    expect([ims.status, ims.body]).toEqual([200, 'fresh content']);
    const ranged = await davRequest(s.url, 'GET', '/dav/undated.txt', { ...auth, headers: { Range: 'bytes=0-4', 'If-Range': 'Thu, 01 Jan 1970 00:00:00 GMT' } });
    expect([ranged.status, ranged.body]).toEqual([200, 'fresh content']);
  });
});
