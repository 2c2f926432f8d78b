/**
 * Code review of the front-end hosting and the settings it serves: defects found by reading
 * protocols/rest/routes/frontend.ts and protocols/rest/frontend/*, each shown against a running server.
 * The same Location encoding holds for the other redirects to admin-entered URLs (down_proxy_url).
 */
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { putFile } from './fs-helpers.js';
import { davRequest } from './clients/webdav.js';
import { makeFakeFrontend, type FakeFrontend } from './frontend-fixture.js';

/** One raw request (any method, no redirects followed). */
const raw = (base: string, path: string, method = 'GET', headers: Record<string, string> = {}) => davRequest(base, method, path, { headers });

let fe: FakeFrontend;
let srv: TestServer;
let token: string;

beforeAll(async () => {
  fe = await makeFakeFrontend();
  srv = await startTestServer({ env: { TREEGATE_DIST_DIR: fe.dist, TREEGATE_SFTP_ENABLE: 'false' } });
  token = await srv.login();
});

afterAll(async () => {
  await srv?.close();
  await rm(fe.dir, { recursive: true, force: true });
});

const save = (key: string, value: string) => srv.api('/api/admin/setting/save', { token, body: [{ key, value }] });

describe('/favicon.ico', () => {
  it('redirects to a favicon URL with non-ASCII characters (percent-encoded as UTF-8), not a 500', async () => {
    expect((await save('favicon', 'https://example.test/图标 é.png?v=1%202')).code).toBe(200);
    const r = await raw(srv.url, '/favicon.ico');
    expect(r.status).toBe(302);
    expect(r.headers.location).toBe('https://example.test/%E5%9B%BE%E6%A0%87%20%C3%A9.png?v=1%202');
    expect(new URL(r.headers.location as string).pathname).toBe('/' + encodeURIComponent('图标 é.png'));
  });

  it('a line break in the favicon setting neither splits the header nor fails the request', async () => {
    expect((await save('favicon', 'https://example.test/a\r\nX-Injected: 1')).code).toBe(200);
    const r = await raw(srv.url, '/favicon.ico');
    expect(r.status).toBe(302);
    expect(r.headers['x-injected']).toBeUndefined();
    expect(r.headers.location).toBe('https://example.test/a%0D%0AX-Injected:%201');
  });
});

describe('static folders', () => {
  // AList serves these with Go's http.FileServer, which honours Range (players and Safari need it).
  it('answer a Range with 206 and just those bytes, and a range past the end with 416', async () => {
    const css = 'body { font-family: sans-serif; }\nh1 { font-size: 40px; }\n';
    const full = await raw(srv.url, '/assets/index.css');
    expect(full.headers['accept-ranges']).toBe('bytes');
    const part = await raw(srv.url, '/assets/index.css', 'GET', { range: 'bytes=0-3' });
    expect(part.status).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes 0-3/${css.length}`);
    expect(part.headers['content-length']).toBe('4');
    expect(part.body).toBe('body');
    const tail = await raw(srv.url, '/assets/index.css', 'GET', { range: 'bytes=-6' });
    expect([tail.status, tail.body]).toEqual([206, css.slice(-6)]);
    const head = await raw(srv.url, '/assets/index.css', 'HEAD', { range: 'bytes=5-' });
    expect([head.status, head.headers['content-length'], head.headers['content-range']]).toEqual([206, String(css.length - 5), `bytes 5-${css.length - 1}/${css.length}`]);
    const past = await raw(srv.url, '/assets/index.css', 'GET', { range: `bytes=${css.length}-` });
    expect(past.status).toBe(416);
    expect(past.headers['content-range']).toBe(`bytes */${css.length}`);
    // A stale If-Range gets the whole file.
    const stale = await raw(srv.url, '/assets/index.css', 'GET', { range: 'bytes=0-3', 'if-range': '"stale"' });
    expect([stale.status, stale.body]).toEqual([200, css]);
  });
});

describe('redirects to a down_proxy_url with non-ASCII characters', () => {
  it('/p and a WebDAV GET (use_proxy_url) answer 302 with the URL percent-encoded, not a 500', async () => {
    const c = await srv.api('/api/admin/storage/create', {
      token, body: { mount_path: '/px', driver: 'Memory', addition: '{}', webdav_policy: 'use_proxy_url', down_proxy_url: 'https://proxy.example/下载' },
    });
    expect(c.code).toBe(200);
    expect((await putFile(srv, token, '/px/a.txt', 'abc')).code).toBe(200);
    const g = await srv.api<{ sign: string }>('/api/fs/get', { token, body: { path: '/px/a.txt' } });
    const p = await raw(srv.url, `/p/px/a.txt?sign=${encodeURIComponent(g.data!.sign)}`);
    expect(p.status).toBe(302);
    expect(p.headers.location).toMatch(/^https:\/\/proxy\.example\/%E4%B8%8B%E8%BD%BD\/px\/a\.txt\?sign=/);
    const basic = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
    const d = await raw(srv.url, '/dav/px/a.txt', 'GET', { authorization: basic });
    expect(d.status).toBe(302);
    expect(d.headers.location).toMatch(/^https:\/\/proxy\.example\/%E4%B8%8B%E8%BD%BD\/px\/a\.txt\?sign=/);
  });
});
