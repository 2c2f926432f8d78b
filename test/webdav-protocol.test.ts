/** WebDAV wire behaviour that litmus does not pin down: auth answers, GET/PUT details, locks and props across restarts, policies, logging. */
import { readdirSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, davRequest, type DavClient } from './clients/webdav.js';

let ts: TestServer;
let dav: DavClient;
const lockinfo = (scope = 'exclusive') =>
  `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:${scope}/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>me</D:owner></D:lockinfo>`;
const tokenOf = (h: string | string[] | undefined) => String(h).replace(/^<|>$/g, '');

beforeAll(async () => {
  ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
});
afterAll(async () => {
  await ts?.close();
});

describe('authentication', () => {
  it('answers OPTIONS without credentials and 401 with a challenge otherwise', async () => {
    const o = await davRequest(ts.url, 'OPTIONS', '/dav/');
    expect(o.status).toBe(200);
    expect(o.headers['dav']).toBe('1, 2');
    expect(o.headers['ms-author-via']).toBe('DAV');
    expect(o.headers['allow']).toContain('PROPFIND');
    // Windows' redirector asks the site root first; a CORS preflight there stays the REST app's.
    const root = await davRequest(ts.url, 'OPTIONS', '/');
    expect([root.status, root.headers['dav'], root.headers['ms-author-via']]).toEqual([200, '1, 2', 'DAV']);
    const none = await davRequest(ts.url, 'PROPFIND', '/dav/');
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Basic realm="treegate"/);
    const bad = await davRequest(ts.url, 'GET', '/dav/', { user: 'admin', password: 'wrong' });
    expect(bad.status).toBe(401);
    expect(bad.headers['www-authenticate']).toMatch(/^Basic/);
  });

  it('refuses users with 2FA (Basic cannot carry a code)', async () => {
    const store = ts.running.core.store;
    const admin = (await store.users.findBy('username', 'admin'))[0]!;
    await store.users.update(admin.id, { otp_secret: 'JBSWY3DPEHPK3PXP' });
    ts.running.core.accounts.forgetCredentials();
    try {
      expect((await dav('PROPFIND', '/', { headers: { Depth: '0' } })).status).toBe(403);
    } finally {
      await store.users.update(admin.id, { otp_secret: '' });
      ts.running.core.accounts.forgetCredentials();
    }
    expect((await dav('PROPFIND', '/', { headers: { Depth: '0' } })).status).toBe(207);
  });
});

describe('PROPFIND', () => {
  it('refuses Depth infinity with propfind-finite-depth, 404s missing paths, serves quota', async () => {
    const inf = await dav('PROPFIND', '/', { headers: { Depth: 'infinity' } });
    expect(inf.status).toBe(403);
    expect(inf.body).toContain('propfind-finite-depth');
    expect((await dav('PROPFIND', '/nope', { headers: { Depth: '0' } })).status).toBe(404);
    const q = await dav('PROPFIND', '/', {
      headers: { Depth: '0' },
      body: '<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:quota-available-bytes/><D:quota-used-bytes/><D:getlastmodified/><x:nope xmlns:x="urn:x"/></D:prop></D:propfind>',
    });
    expect(q.status).toBe(207);
    expect(q.body).toMatch(/<D:quota-available-bytes>\d+<\/D:quota-available-bytes>/);
    expect(q.body).toMatch(/<D:getlastmodified>\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT<\/D:getlastmodified>/);
    expect(q.body).toContain('<nope xmlns="urn:x"/>');
    expect(q.body).toContain('HTTP/1.1 404 Not Found');
  });

  it('lists a 1,500-entry folder in one streamed answer', async () => {
    expect((await dav('MKCOL', '/many')).status).toBe(201);
    for (let i = 0; i < 1500; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, j) => dav('PUT', `/many/f${i + j}.txt`, { body: 'x' })));
    }
    const r = await dav('PROPFIND', '/many/', { headers: { Depth: '1' } });
    expect(r.status).toBe(207);
    expect(r.body.match(/<D:response>/g)).toHaveLength(1501);
    expect(r.headers['transfer-encoding']).toBe('chunked');
  });
});

describe('GET and PUT', () => {
  it('PUT: 409 without parent, 201 new, 204 replace, X-OC-Mtime, ETag', async () => {
    expect((await dav('PUT', '/no/parent.txt', { body: 'x' })).status).toBe(409);
    const created = await dav('PUT', '/g.txt', { body: '0123456789', headers: { 'X-OC-Mtime': '1700000000' } });
    expect(created.status).toBe(201);
    expect(created.headers['x-oc-mtime']).toBe('accepted');
    expect(created.headers['etag']).toMatch(/^".+"$/);
    const p = await dav('PROPFIND', '/g.txt', { headers: { Depth: '0' } });
    expect(p.body).toContain(`<D:getlastmodified>${new Date(1700000000_000).toUTCString()}</D:getlastmodified>`);
    expect((await dav('PUT', '/g.txt', { body: 'abcdefghij' })).status).toBe(204);
    expect((await dav('MKCOL', '/gd')).status).toBe(201);
    expect((await dav('PUT', '/gd', { body: 'x' })).status).toBe(405);
  });

  it('GET: ranges, If-Range, conditional requests, HEAD', async () => {
    const full = await dav('GET', '/g.txt');
    expect(full.body).toBe('abcdefghij');
    const etag = String(full.headers['etag']);
    const part = await dav('GET', '/g.txt', { headers: { Range: 'bytes=2-4' } });
    expect([part.status, part.body, part.headers['content-range']]).toEqual([206, 'cde', 'bytes 2-4/10']);
    expect((await dav('GET', '/g.txt', { headers: { Range: 'bytes=-3' } })).body).toBe('hij');
    expect((await dav('GET', '/g.txt', { headers: { Range: 'bytes=2-4', 'If-Range': etag } })).status).toBe(206);
    expect((await dav('GET', '/g.txt', { headers: { Range: 'bytes=2-4', 'If-Range': '"other"' } })).status).toBe(200);
    const unsat = await dav('GET', '/g.txt', { headers: { Range: 'bytes=50-' } });
    expect([unsat.status, unsat.headers['content-range']]).toEqual([416, 'bytes */10']);
    expect((await dav('GET', '/g.txt', { headers: { 'If-None-Match': etag } })).status).toBe(304);
    expect((await dav('GET', '/g.txt', { headers: { 'If-Modified-Since': String(full.headers['last-modified']) } })).status).toBe(304);
    expect((await dav('GET', '/g.txt', { headers: { 'If-Match': '"x"' } })).status).toBe(412);
    const head = await dav('HEAD', '/g.txt');
    expect([head.status, head.headers['content-length'], head.body]).toEqual([200, '10', '']);
    expect((await dav('GET', '/gd/')).status).toBe(405);
  });

  it('a client that hangs up mid-GET is logged as aborted, not as a server failure', async () => {
    expect((await dav('PUT', '/hangup.bin', { body: Buffer.alloc(32 << 20, 7) })).status).toBe(201);
    const u = new URL(ts.url);
    await new Promise<void>((resolve, reject) => {
      const auth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
      const req = request({ host: u.hostname, port: u.port, path: '/dav/hangup.bin', headers: { authorization: auth } }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (e) => (e.message === 'socket hang up' ? undefined : reject(e)));
      req.end();
    });
    const logged = () => ts.logs.find((l) => l.includes('"/hangup.bin"') && l.includes('"method":"GET"'));
    for (let i = 0; i < 100 && !logged(); i++) await new Promise((r) => setTimeout(r, 50));
    expect(JSON.parse(logged()!)).toMatchObject({ status: 499, aborted: true });
    expect(ts.logs.filter((l) => l.includes('"level":50') && l.includes('"proto":"webdav"'))).toEqual([]);
  });

  // The second case cuts a PUT on a connection whose earlier PUT handed its abort signal on (handler.ts).
  it.each([
    ['on a new connection', 'cutdav'],
    ['after a PUT on the same keep-alive connection', 'cutdav2'],
  ])('a client that hangs up mid-PUT leaves nothing under the final name and no temp file (%s)', async (_how, dir) => {
    expect((await dav('MKCOL', `/${dir}/`)).status).toBe(201);
    const folder = join(ts.dataDir, 'storage', dir);
    const u = new URL(ts.url);
    const auth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    if (dir === 'cutdav2') {
      const put = (name: string) => new Promise<number>((resolve, reject) => {
        const req = request({ agent, host: u.hostname, port: u.port, method: 'PUT', path: `/dav/${dir}/${name}`, headers: { authorization: auth, 'content-length': '3' } }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        });
        req.on('error', reject);
        req.end('abc');
      });
      expect([await put('a.bin'), await put('b.bin')]).toEqual([201, 201]);
      for (const name of ['a.bin', 'b.bin']) expect((await dav('DELETE', `/${dir}/${name}`)).status).toBe(204);
    }
    let sawTemp = false;
    await new Promise<void>((resolve) => {
      const req = request({ agent, host: u.hostname, port: u.port, method: 'PUT', path: `/dav/${dir}/partial.bin`, headers: { authorization: auth, 'content-length': String(8 << 20) } });
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      // Cut the connection once the server is visibly writing (its temp file exists).
      req.write(Buffer.alloc(1 << 20, 1), async () => {
        for (let i = 0; i < 250 && !(sawTemp = readdirSync(folder).length > 0); i++) await new Promise((r) => setTimeout(r, 20));
        req.destroy();
      });
    });
    agent.destroy();
    expect(sawTemp).toBe(true);
    for (let i = 0; i < 250 && readdirSync(folder).length > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(readdirSync(folder)).toEqual([]);
    expect((await dav('GET', `/${dir}/partial.bin`)).status).toBe(404);
    // The client's hang-up is logged as such (499, aborted), never as a server error with a stack.
    const logged = () => ts.logs.find((l) => l.includes(`"/${dir}/partial.bin"`) && l.includes('"method":"PUT"'));
    for (let i = 0; i < 100 && !logged(); i++) await new Promise((r) => setTimeout(r, 50));
    expect(JSON.parse(logged()!)).toMatchObject({ status: 499, aborted: true });
    expect(ts.logs.filter((l) => l.includes('"level":50') && l.includes('"proto":"webdav"'))).toEqual([]);
  });

  it('MKCOL with a body is 415; COPY/MOVE take absolute, percent-encoded destinations', async () => {
    expect((await dav('MKCOL', '/mb', { body: 'x', headers: { 'Content-Type': 'text/plain' } })).status).toBe(415);
    expect((await dav('COPY', '/g.txt', { headers: { Destination: `${ts.url}/dav/sp%20ace%C3%BC.txt` } })).status).toBe(201);
    expect((await dav('GET', '/sp ace\u00fc.txt'.replace(' ', '%20').replace('\u00fc', '%C3%BC'))).body).toBe('abcdefghij');
    expect((await dav('COPY', '/g.txt', { headers: { Destination: '/dav/sp%20ace%C3%BC.txt', Overwrite: 'F' } })).status).toBe(412);
    expect((await dav('MOVE', '/g.txt', { headers: { Destination: `${ts.url}/dav/gd/g.txt` } })).status).toBe(201);
    expect((await dav('COPY', '/gd/g.txt', { headers: { Destination: 'http://elsewhere.example/x' } })).status).toBe(502);
  });
});

describe('webdav_policy', () => {
  it('use_proxy_url redirects to down_proxy_url with a sign, and streams without one', async () => {
    expect((await dav('PUT', '/pol.txt', { body: 'policy' })).status).toBe(201);
    const storages = ts.running.core.storages;
    const rec = (await storages.list()).find((s) => s.mount_path === '/')!;
    await storages.update({ ...rec, webdav_policy: 'use_proxy_url', down_proxy_url: 'https://proxy.example/base/' });
    try {
      const r = await dav('GET', '/pol.txt');
      expect(r.status).toBe(302);
      expect(String(r.headers['location'])).toMatch(/^https:\/\/proxy\.example\/base\/pol\.txt\?sign=[\w=-]+:\d+$/);
      await storages.update({ ...rec, webdav_policy: 'use_proxy_url', down_proxy_url: '' });
      const s = await dav('GET', '/pol.txt');
      expect([s.status, s.body]).toEqual([200, 'policy']);
    } finally {
      await storages.update(rec);
    }
  });
});

describe('locks and dead properties', () => {
  it('423 without the token, success with it, lock-null creation, UNLOCK', async () => {
    const l = await dav('LOCK', '/new-locked.txt', { body: lockinfo(), headers: { Timeout: 'Second-600', Depth: '0' } });
    expect(l.status).toBe(201);
    expect(l.body).toContain('<D:timeout>Second-600</D:timeout>');
    const token = tokenOf(l.headers['lock-token']);
    expect((await dav('GET', '/new-locked.txt')).body).toBe('');
    expect((await dav('PUT', '/new-locked.txt', { body: 'x' })).status).toBe(423);
    expect((await dav('DELETE', '/new-locked.txt')).status).toBe(423);
    expect((await dav('LOCK', '/new-locked.txt', { body: lockinfo('shared') })).status).toBe(423);
    expect((await dav('PUT', '/new-locked.txt', { body: 'y', headers: { If: `(<${token}>)` } })).status).toBe(204);
    expect((await dav('UNLOCK', '/new-locked.txt', { headers: { 'Lock-Token': '<opaquelocktoken:nope>' } })).status).toBe(409);
    expect((await dav('UNLOCK', '/new-locked.txt', { headers: { 'Lock-Token': `<${token}>` } })).status).toBe(204);
    expect((await dav('PUT', '/new-locked.txt', { body: 'z' })).status).toBe(204);
  });

  it('a depth-infinity lock on a folder guards new members', async () => {
    expect((await dav('MKCOL', '/lc')).status).toBe(201);
    const l = await dav('LOCK', '/lc/', { body: lockinfo() });
    const token = tokenOf(l.headers['lock-token']);
    expect((await dav('PUT', '/lc/a.txt', { body: 'x' })).status).toBe(423);
    expect((await dav('MKCOL', '/lc/sub')).status).toBe(423);
    expect((await dav('PUT', '/lc/a.txt', { body: 'x', headers: { If: `<${ts.url}/dav/lc/> (<${token}>)` } })).status).toBe(201);
    expect((await dav('MOVE', '/new-locked.txt', { headers: { Destination: '/dav/lc/moved.txt' } })).status).toBe(423);
    expect((await dav('UNLOCK', '/lc/a.txt', { headers: { 'Lock-Token': `<${token}>` } })).status).toBe(204);
  });
});

describe('behind a proxy at a sub-path', () => {
  it('prefixes hrefs with site_url\'s path and accepts prefixed Destinations', async () => {
    const sub = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false', TREEGATE_SITE_URL: 'https://nas.example/tg' } });
    try {
      const d = (m: string, p: string, o: { headers?: Record<string, string>; body?: string } = {}) =>
        davRequest(sub.url, m, '/tg/dav' + p, { user: 'admin', password: ADMIN_PASSWORD, ...o });
      expect((await d('PUT', '/a.txt', { body: 'a' })).status).toBe(201);
      const l = await d('PROPFIND', '/', { headers: { Depth: '1' } });
      expect(l.body).toContain('<D:href>/tg/dav/a.txt</D:href>');
      expect((await d('COPY', '/a.txt', { headers: { Destination: 'https://nas.example/tg/dav/b.txt' } })).status).toBe(201);
      expect((await d('GET', '/b.txt')).body).toBe('a');
    } finally {
      await sub.close();
    }
  });
});

describe('persistence and logging', () => {
  it('keeps locks and dead properties across a restart', async () => {
    expect((await dav('PUT', '/keep.txt', { body: 'k' })).status).toBe(201);
    const pp = await dav('PROPPATCH', '/keep.txt', {
      body: '<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><x:color xmlns:x="urn:x">blue</x:color></D:prop></D:set></D:propertyupdate>',
    });
    expect(pp.status).toBe(207);
    const token = tokenOf((await dav('LOCK', '/keep.txt', { body: lockinfo() })).headers['lock-token']);
    const dataDir = ts.dataDir;
    await ts.running.close();
    const again = await startTestServer({ dataDir, env: { TREEGATE_SFTP_ENABLE: 'false' } });
    try {
      const d2 = davClient(again.url, 'admin', ADMIN_PASSWORD);
      expect((await d2('PUT', '/keep.txt', { body: 'no' })).status).toBe(423);
      const p = await d2('PROPFIND', '/keep.txt', { headers: { Depth: '0' } });
      expect(p.body).toContain('<color xmlns="urn:x">blue</color>');
      expect(p.body).toContain(token);
      expect((await d2('UNLOCK', '/keep.txt', { headers: { 'Lock-Token': `<${token}>` } })).status).toBe(204);
    } finally {
      await again.running.close();
      ts = { ...ts, close: async () => {} } as TestServer;
    }
  });

  it('logs one line per request without credentials', () => {
    const lines = ts.logs.filter((l) => l.includes('"proto":"webdav"') && l.includes('"method"'));
    expect(lines.length).toBeGreaterThan(10);
    const one = JSON.parse(lines.find((l) => l.includes('"/g.txt"'))!) as Record<string, unknown>;
    expect(one).toMatchObject({ path: '/g.txt', user: 'admin' });
    expect(typeof one.status).toBe('number');
    expect(typeof one.ms).toBe('number');
    expect(ts.logs.some((l) => l.includes(ADMIN_PASSWORD) || l.includes(Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')))).toBe(false);
  });
});
