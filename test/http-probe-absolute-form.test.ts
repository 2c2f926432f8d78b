/**
 * Request targets in absolute-form (`GET http://host/path HTTP/1.1`), which RFC 9112 §3.2.2 says a
 * server must accept (src/server.ts originForm). They were half-served: REST routes matched, but
 * WebDAV was never recognised (fastify's 404) and /d, /p refused a valid sign (the file path was
 * read out of the raw URL).
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { originForm } from '../src/server.js';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { rawExchange } from './clients/raw-http.js';

let s: TestServer;
let token: string;
const basic = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

beforeAll(async () => {
  s = await startTestServer();
  token = await s.login();
  await writeFile(join(s.dataDir, 'storage', 'abs.txt'), 'absolute');
});
afterAll(async () => {
  await s?.close();
});

/** One request over a raw socket (Connection: close); the whole answer. */
const raw = (lines: string[]) => rawExchange(s.url, [...lines, 'Connection: close', '', ''].join('\r\n'));

describe('absolute-form request targets', () => {
  it('WebDAV PROPFIND is served by WebDAV', async () => {
    const r = await raw([`PROPFIND ${s.url}/dav/abs.txt HTTP/1.1`, 'Host: 127.0.0.1', `Authorization: ${basic}`, 'Depth: 0']);
    expect(r).toMatch(/^HTTP\/1\.1 207 /);
    expect(r).toContain('<D:href>/dav/abs.txt</D:href>');
  });

  it('a signed /p link is served', async () => {
    const got = await s.api<{ raw_url: string }>('/api/fs/get', { body: { path: '/abs.txt' }, token });
    const r = await raw([`GET ${got.data!.raw_url} HTTP/1.1`, 'Host: 127.0.0.1']);
    expect(r).toMatch(/^HTTP\/1\.1 200 /);
    expect(r.endsWith('\r\n\r\nabsolute')).toBe(true);
  });

  it('REST still works', async () => {
    const r = await raw([`GET ${s.url}/api/me HTTP/1.1`, 'Host: 127.0.0.1', `Authorization: ${token}`]);
    expect(r).toMatch(/"username":"admin"/);
  });
});

describe('originForm', () => {
  it('keeps the path and query, drops scheme and authority', () => {
    expect(originForm('http://h:1/dav/a%20b?x=1')).toBe('/dav/a%20b?x=1');
    expect(originForm('HTTPS://h')).toBe('/');
    expect(originForm('http://h?x')).toBe('/?x');
    expect(originForm('/already/origin')).toBe('/already/origin');
    expect(originForm('*')).toBe('*');
  });
});
