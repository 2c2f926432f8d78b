/**
 * The web front end on the HTTP port (issue 9): index.html placeholders, SPA fallback, static folders
 * (cache, types, HEAD, 304, traversal and symlink refusal), API paths never swallowed by the
 * fallback, favicon/robots, the no-front-end page, and base_path.
 */
import { request } from 'node:http';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { makeFakeFrontend, SECRET, INDEX_HTML, type FakeFrontend } from './frontend-fixture.js';
import { IndexPage } from '../protocols/rest/frontend/index-html.js';
import { stripBasePath, stripBasePathFromRequest } from '../protocols/rest/frontend/base-path.js';
import { basePathOf } from '../src/site-url.js';

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A request whose path is sent exactly as given (fetch would normalise `..` away). */
function raw(base: string, path: string, method = 'GET', headers: Record<string, string> = {}): Promise<Raw> {
  const { port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const MARKER = 'data-marker="fake-frontend"';
const isIndex = (r: Raw) => r.status === 200 && String(r.headers['content-type']).startsWith('text/html') && r.body.includes(MARKER);

let fe: FakeFrontend;
let srv: TestServer;

beforeAll(async () => {
  fe = await makeFakeFrontend();
  srv = await startTestServer({ env: { TREEGATE_DIST_DIR: fe.dist, TREEGATE_SFTP_ENABLE: 'false' } });
  await srv.running.core.settings.save({
    site_title: 'Fake & Friends',
    main_color: '#123456',
    favicon: 'https://example.test/fav.png',
    customize_head: '<meta name="x-custom-head" content="1">',
    customize_body: '<div id="custom-body"></div>',
    robots_txt: 'User-agent: *\nDisallow: /secret',
  });
});

afterAll(async () => {
  await srv?.close();
  await rm(fe.dir, { recursive: true, force: true });
});

describe('index.html', () => {
  it('fills AList placeholders and keeps api/monaco_cdn undefined', async () => {
    const r = await raw(srv.url, '/');
    expect(isIndex(r)).toBe(true);
    expect(r.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(r.body).toContain("cdn: '', monaco_cdn: undefined, api: undefined, main_color: '#123456', base_path: ''");
    expect(r.body).toContain('<title>Fake &#38; Friends</title>');
    expect(r.body).toContain('<link rel="icon" href="https://example.test/fav.png" />');
    // Only the first occurrence of the favicon URL and of "Loading..." are replaced (as AList does).
    expect(r.body).toContain('<meta name="x-logo" content="https://jsd.nn.ci/gh/alist-org/logo@main/logo.svg" />');
    expect(r.body).toContain('data-marker="fake-frontend">Loading...</div>');
    expect(r.body).toContain('<meta name="x-custom-head" content="1">');
    expect(r.body).toContain('<div id="custom-body"></div>');
    expect(r.body).not.toContain('<!-- customize head -->');
  });

  it('leaves customize head/body out of /@manage pages', async () => {
    for (const p of ['/@manage', '/@manage/settings/site', '/%40manage/users']) {
      const r = await raw(srv.url, p);
      expect(isIndex(r), p).toBe(true);
      expect(r.body).toContain('<!-- customize head -->');
      expect(r.body).toContain('<!-- customize body -->');
      expect(r.body).not.toContain('x-custom-head');
      expect(r.body).toContain("main_color: '#123456'");
    }
    expect((await raw(srv.url, '/@managed')).body).toContain('x-custom-head'); // not a manage page
  });

  it('follows setting changes', async () => {
    await srv.running.core.settings.save({ site_title: 'Renamed' });
    expect((await raw(srv.url, '/@login')).body).toContain('<title>Renamed</title>');
    await srv.running.core.settings.save({ site_title: 'Fake & Friends' });
  });

  it('renders once per settings change, not per request', () => {
    const values: Record<string, string> = { site_title: 'A', favicon: 'f', main_color: 'c', customize_head: "<s>'$&'</s>", customize_body: '' };
    const page = new IndexPage(INDEX_HTML, '/tg', { get: (k: string) => values[k] ?? '' });
    const render = vi.spyOn(page as unknown as { render: () => void }, 'render');
    const first = page.html('/');
    page.html('/x');
    page.html('/@manage');
    expect(render).toHaveBeenCalledTimes(1);
    expect(first).toContain("cdn: '/tg'");
    expect(first).toContain("base_path: '/tg'");
    expect(first).toContain("<s>'$&'</s>"); // inserted literally (no replacement patterns)
    values.site_title = 'B';
    expect(page.html('/')).toContain('<title>B</title>');
    expect(render).toHaveBeenCalledTimes(2);
  });

  it('escapes values put into the JS string literals', () => {
    const page = new IndexPage(INDEX_HTML, '', { get: (k: string) => (k === 'main_color' ? "red'</script><script>alert(1)//" : '') });
    const html = page.html('/');
    expect(html).not.toContain("red'</script>");
    expect(html).toContain("main_color: 'red\\u0027\\u003c/script>\\u003cscript>alert(1)//'");
  });
});

describe('SPA fallback', () => {
  it('answers index.html for client routes and file-browser paths', async () => {
    for (const p of ['/@login?redirect=%2F', '/@manage/storages/edit/3', '/@test', '/foo/bar.txt', '/%E4%B8%AD%E6%96%87/x', '/dfoo', '/apix', '/pinged']) {
      const r = await raw(srv.url, p);
      expect(isIndex(r), p).toBe(true);
      expect(r.headers['cache-control']).toBe('no-cache');
    }
    const head = await raw(srv.url, '/some/folder', 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(head.body).toBe('');
  });

  it('never swallows API paths', async () => {
    const env = async (p: string, method = 'GET') => {
      const r = await raw(srv.url, p, method);
      expect(r.body, p).not.toContain(MARKER);
      expect(String(r.headers['content-type']), p).toContain('application/json');
      return JSON.parse(r.body) as { code: number; message: string; data: unknown };
    };
    expect(await env('/api/x')).toMatchObject({ code: 404, message: 'route not found: GET /api/x' });
    expect((await env('/api')).code).toBe(404);
    expect((await env('/api/')).code).toBe(404);
    expect((await env('/api/nope?x=1', 'POST')).code).toBe(404);
    expect((await env('/api/fs/mkdir')).code).toBe(404); // known route, wrong method
    expect((await env('/api/public/settings')).code).toBe(200);
    expect(await env('/api/public/archive_extensions')).toMatchObject({ code: 200, data: expect.any(Array) });
    expect((await env('/d/no/such/file.txt')).code).not.toBe(200);
    expect((await env('/p/no/such/file.txt')).code).not.toBe(200);

    for (const p of ['/d', '/p', '/i/abc.plist', '/dav', '/dav/', '/dav/x', '/favicon.ico', '/robots.txt', '/ping']) {
      const r = await raw(srv.url, p);
      expect(r.body, p).not.toContain(MARKER);
    }
    expect((await raw(srv.url, '/ping')).body).toBe('pong');
    expect((await raw(srv.url, '/d')).status).toBe(404);
    // Non-GET methods on unknown paths are never the fallback either.
    const post = await raw(srv.url, '/foo', 'POST');
    expect(post.status).toBe(404);
    expect(post.body).not.toContain(MARKER);
  });

  it('answers clean envelopes for front-end features treegate lacks', async () => {
    const cases: Array<[string, string, number]> = [
      ['GET', '/api/auth/sso?method=sso_get_token', 500],
      ['POST', '/api/auth/login/ldap', 500],
      ['GET', '/api/authn/webauthn_begin_login?username=admin', 500],
      ['POST', '/api/fs/archive/meta', 500],
      ['POST', '/api/admin/message/get', 500],
    ];
    const admin = { authorization: await srv.login() };
    for (const [method, p, code] of cases) {
      const r = await raw(srv.url, p, method, admin);
      const body = JSON.parse(r.body) as { code: number; message: string };
      expect(body.code, p).toBe(code);
      expect(body.message, p).toMatch(/not supported by treegate$/);
    }
    const creds = JSON.parse((await raw(srv.url, '/api/authn/getcredentials')).body) as { code: number; data: unknown };
    expect(creds).toMatchObject({ code: 200, data: [] });
  });

  it('guards unknown admin and task routes as the known ones: 401 before any answer', async () => {
    for (const p of ['/api/admin/message/get', '/api/admin/task/decompress/undone', '/api/task/decompress/done', '/api/admin/nope']) {
      const r = JSON.parse((await raw(srv.url, p, 'POST')).body) as { code: number; message: string };
      expect(r.code, p).toBe(401);
      const bad = JSON.parse((await raw(srv.url, p, 'POST', { authorization: 'not-a-token' })).body) as { code: number };
      expect(bad.code, p).toBe(401);
    }
    const token = await srv.login();
    const poll = JSON.parse((await raw(srv.url, '/api/admin/task/decompress/undone', 'POST', { authorization: token })).body) as { code: number; data: unknown };
    expect(poll).toMatchObject({ code: 200, data: [] });
    const nope = JSON.parse((await raw(srv.url, '/api/admin/nope', 'POST', { authorization: token })).body) as { code: number };
    expect(nope.code).toBe(404);
  });

  it('redirects /favicon.ico and serves /robots.txt from settings', async () => {
    const fav = await raw(srv.url, '/favicon.ico');
    expect(fav.status).toBe(302);
    expect(fav.headers.location).toBe('https://example.test/fav.png');
    const robots = await raw(srv.url, '/robots.txt');
    expect(robots.status).toBe(200);
    expect(robots.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(robots.body).toBe('User-agent: *\nDisallow: /secret');
  });
});

describe('static folders', () => {
  it('serve files with the long cache and the right types', async () => {
    const cases: Array<[string, string, string]> = [
      ['/assets/index.js', 'text/javascript; charset=utf-8', '/public/settings'],
      ['/assets/index.css', 'text/css; charset=utf-8', 'font-family'],
      ['/assets/font.woff2', 'font/woff2', 'wOF2'],
      ['/images/dot.png', 'image/png', ''],
      ['/static/manifest.json', 'application/json; charset=utf-8', '"fake"'],
      ['/streamer/player.html', 'text/html; charset=utf-8', 'player'],
      ['/assets/alias.css?v=2', 'text/css; charset=utf-8', 'font-family'], // a symlink inside dist is fine
    ];
    for (const [p, type, text] of cases) {
      const r = await raw(srv.url, p);
      expect(r.status, p).toBe(200);
      expect(r.headers['content-type'], p).toBe(type);
      expect(r.headers['cache-control'], p).toBe('public, max-age=15552000');
      expect(r.body, p).toContain(text);
      expect(r.body, p).not.toContain(MARKER);
    }
  });

  it('handles HEAD and conditional requests', async () => {
    const head = await raw(srv.url, '/assets/index.css', 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe(String(Buffer.byteLength('body { font-family: sans-serif; }\nh1 { font-size: 40px; }\n')));
    expect(head.headers['content-type']).toBe('text/css; charset=utf-8');
    expect(head.body).toBe('');
    const etag = String(head.headers.etag);
    const again = await raw(srv.url, '/assets/index.css', 'GET', { 'if-none-match': etag });
    expect(again.status).toBe(304);
    expect(again.body).toBe('');
  });

  it('answers 404 (never index.html) for missing assets and folders', async () => {
    for (const p of ['/assets/missing.js', '/assets/', '/images', '/static/nested/none.json', '/streamer/x']) {
      const r = await raw(srv.url, p);
      expect(r.status, p).toBe(404);
      expect(r.body, p).not.toContain(MARKER);
    }
  });

  it('refuses traversal and symlinks out of dist_dir', async () => {
    const attempts = [
      '/assets/../../secret.txt',
      '/assets/%2e%2e/%2e%2e/secret.txt',
      '/assets/..%2f..%2fsecret.txt',
      '/assets/%2E%2E%2F%2E%2E%2Fsecret.txt',
      '/assets/..%5c..%5csecret.txt',
      '/static/%00/../secret.txt',
      '/assets/escape.txt',
      '/images/../index.html',
    ];
    for (const p of attempts) {
      const r = await raw(srv.url, p);
      expect(r.body, p).not.toContain(SECRET);
      expect(r.headers['cache-control'], p).not.toBe('public, max-age=15552000');
    }
    expect((await raw(srv.url, '/assets/escape.txt')).status).toBe(404);
    expect((await raw(srv.url, '/assets/%2e%2e/%2e%2e/secret.txt')).status).toBe(404);
  });
});

describe('without dist_dir', () => {
  it('GET / says the API is up and how to add a front end; other paths 404', async () => {
    const bare = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
    try {
      const r = await raw(bare.url, '/');
      expect(r.status).toBe(200);
      expect(r.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(r.body).toContain('The API is up');
      expect(r.body).toContain('dist_dir');
      expect(r.body).toContain('TREEGATE_DIST_DIR');
      expect((await raw(bare.url, '/@login')).status).toBe(404);
      expect((await raw(bare.url, '/assets/index.js')).status).toBe(404);
      expect(JSON.parse((await raw(bare.url, '/api/x')).body)).toMatchObject({ code: 404 });
      expect((await raw(bare.url, '/favicon.ico')).status).toBe(302);
    } finally {
      await bare.close();
    }
  });
});

describe('unreadable dist_dir', () => {
  it('still starts the API and shows the problem on GET /', async () => {
    const broken = await startTestServer({ env: { TREEGATE_DIST_DIR: fe.dir + '/no-such-dir', TREEGATE_SFTP_ENABLE: 'false' } });
    try {
      const r = await raw(broken.url, '/');
      expect(r.status).toBe(200);
      expect(r.body).toContain('The API is up');
      expect(r.body).toContain('could not be loaded');
      expect(r.body).toContain('ENOENT');
      expect(broken.logs.some((l) => l.includes('cannot read its index.html'))).toBe(true);
      expect(JSON.parse((await raw(broken.url, '/api/public/settings')).body)).toMatchObject({ code: 200 });
    } finally {
      await broken.close();
    }
  });
});

describe('base_path', () => {
  it('derives the path from site_url and strips it on segment boundaries', () => {
    expect(basePathOf('')).toBe('');
    expect(basePathOf('https://nas')).toBe('');
    expect(basePathOf('https://nas/')).toBe('');
    expect(basePathOf('https://nas/tg/')).toBe('/tg');
    expect(basePathOf('http://nas:8080/a/b')).toBe('/a/b');
    expect(basePathOf('/tg')).toBe('/tg');
    expect(() => basePathOf('/a/../b')).toThrow(/must not contain/);
    expect(stripBasePath('/tg', '/tg')).toBe('/');
    expect(stripBasePath('/tg?x=1', '/tg')).toBe('/?x=1');
    expect(stripBasePath('/tg/api/me', '/tg')).toBe('/api/me');
    expect(stripBasePath('/tgx/a', '/tg')).toBe('/tgx/a');
    expect(stripBasePath('/api/me', '/tg')).toBe('/api/me');
    const req = { url: '/tg/dav/a', headers: { destination: 'http://nas/tg/dav/b%20c' } as Record<string, string | undefined> };
    stripBasePathFromRequest(req, '/tg');
    expect(req).toEqual({ url: '/dav/a', headers: { destination: 'http://nas/dav/b%20c' } });
  });

  it('serves the API, the front end, /d, /p and /dav under the prefix', async () => {
    const tg = await startTestServer({ env: { TREEGATE_DIST_DIR: fe.dist, TREEGATE_SITE_URL: 'http://nas.example/tg', TREEGATE_SFTP_ENABLE: 'false' } });
    try {
      for (const p of ['/tg', '/tg/', '/tg/@login', '/tg/@manage', '/tg/folder/file.txt']) {
        const r = await raw(tg.url, p);
        expect(isIndex(r), p).toBe(true);
        expect(r.body, p).toContain("cdn: '/tg'");
        expect(r.body, p).toContain("base_path: '/tg'");
      }
      expect((await raw(tg.url, '/tg/ping')).body).toBe('pong');
      expect(JSON.parse((await raw(tg.url, '/tg/api/public/settings')).body)).toMatchObject({ code: 200 });
      expect(JSON.parse((await raw(tg.url, '/tg/api/x')).body)).toMatchObject({ code: 404, message: 'route not found: GET /api/x' });
      const js = await raw(tg.url, '/tg/assets/index.js');
      expect(js.status).toBe(200);
      expect(js.headers['cache-control']).toBe('public, max-age=15552000');
      expect((await raw(tg.url, '/tg/favicon.ico')).status).toBe(302);

      // A file through /d and /p under the prefix, with the sign the API hands out.
      const token = await tg.login();
      const put = await tg.api('/tg/api/fs/put', { method: 'PUT', token, body: 'hello', headers: { 'file-path': encodeURIComponent('/hello.txt'), 'content-type': 'text/plain' } });
      expect(put.code).toBe(200);
      const got = await tg.api<{ raw_url: string; sign: string }>('/tg/api/fs/get', { token, body: { path: '/hello.txt' } });
      expect(got.code).toBe(200);
      expect(got.data!.raw_url).toMatch(/^http:\/\/nas\.example\/tg\/[dp]\/hello\.txt/);
      const q = got.data!.sign ? `?sign=${encodeURIComponent(got.data!.sign)}` : '';
      for (const kind of ['d', 'p']) {
        const r = await raw(tg.url, `/tg/${kind}/hello.txt${q}`);
        expect(r.status, kind).toBe(200);
        expect(r.body, kind).toBe('hello');
      }

      // /dav reaches the WebDAV handler (never the SPA fallback), and a prefixed Destination works.
      const dav = { authorization: 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64') };
      for (const p of ['/tg/dav', '/tg/dav/', '/tg/dav/hello.txt']) {
        const r = await raw(tg.url, p, 'PROPFIND', { depth: '0' });
        expect(r.body, p).not.toContain(MARKER);
        expect(r.status, p).toBe(401); // WebDAV's Basic challenge
      }
      const propfind = await raw(tg.url, '/tg/dav/hello.txt', 'PROPFIND', { ...dav, depth: '0' });
      expect(propfind.status).toBe(207);
      const move = await raw(tg.url, '/tg/dav/hello.txt', 'MOVE', { ...dav, destination: 'http://nas.example/tg/dav/moved.txt' });
      expect(move.status).toBe(201);
      expect((await raw(tg.url, '/tg/dav/moved.txt', 'GET', dav)).body).toBe('hello');
      // Without the prefix (a proxy that strips it) everything still answers; `/tgx` is not under `/tg`.
      expect(JSON.parse((await raw(tg.url, '/api/public/settings')).body)).toMatchObject({ code: 200 });
      expect(isIndex(await raw(tg.url, '/tgx/a'))).toBe(true);
    } finally {
      await tg.close();
    }
  });
});
