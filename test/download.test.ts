/** /d and /p: signs, validators, ranges, headers, down_proxy_url redirects (alist-compat §9). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWith } from '../src/sign.js';
import type { TestServer } from './harness.js';
import { addMeta, expectCode, list, makeUser, ok, putFile, rawRequest, seed, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;
const BODY = '0123456789abcdefghij'; // 20 bytes
const token = () => ts.running.core.settings.get('token');
const sign = (path: string, expire = 0) => signWith(token(), path, expire);

async function get(path: string, headers: Record<string, string> = {}, method = 'GET') {
  const res = await fetch(ts.url + path, { method, headers, redirect: 'manual' });
  return { res, body: Buffer.from(await res.arrayBuffer()) };
}
async function envelope(path: string) {
  const { res, body } = await get(path);
  expect(res.status).toBe(200);
  return JSON.parse(body.toString()) as { code: number; message: string };
}
async function setSetting(key: string, value: string) {
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key, value }] }));
}

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  await seed(ts, admin, { '/dl/file.txt': BODY, '/dl/ü n.bin': 'x', '/dl/sub/inner.txt': 'in', '/hid/secret.txt': 's', '/hid/shown.txt': 'v' });
});
afterAll(async () => ts?.close());

describe('signs (sign_all on by default)', () => {
  it('serves a file with a valid sign, with AList headers', async () => {
    const { res, body } = await get(`/d/dl/file.txt?sign=${sign('/dl/file.txt')}`);
    expect(res.status).toBe(200);
    expect(body.toString()).toBe(BODY);
    expect(res.headers.get('content-length')).toBe('20');
    expect(res.headers.get('accept-ranges')).toBe('bytes');
    expect(res.headers.get('etag')).toMatch(/^"[0-9a-f]+-14"$/);
    expect(res.headers.get('last-modified')).toMatch(/GMT$/);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="file.txt"; filename*=UTF-8''file.txt`);
    // Written past fastify's reply.send (sendTo), it still gets its one request log line.
    const line = ts.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'request' && l.path === '/d/dl/file.txt');
    expect(line).toMatchObject({ method: 'GET', status: 200, proto: 'rest', reqId: expect.any(String) });
  });

  it('the sign handed out by fs/list works on /d and /p', async () => {
    const r = await list(ts, admin, '/dl');
    const e = r.data!.content.find((x) => x.name === 'file.txt')!;
    expect((await get(`/d/dl/file.txt?sign=${encodeURIComponent(e.sign)}`)).body.toString()).toBe(BODY);
    expect((await get(`/p/dl/file.txt?sign=${encodeURIComponent(e.sign)}`)).body.toString()).toBe(BODY);
  });

  it('encoded names and a UTF-8 Content-Disposition', async () => {
    const { res, body } = await get(`/d/dl/%C3%BC%20n.bin?sign=${sign('/dl/ü n.bin')}`);
    expect(res.status).toBe(200);
    expect(body.toString()).toBe('x');
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="%C3%BC%20n.bin"; filename*=UTF-8''%C3%BC%20n.bin`);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
  });

  it('missing, malformed, wrong and expired signs answer 401 with AList messages', async () => {
    expectCode(await envelope('/d/dl/file.txt'), 401, 'expire missing');
    expectCode(await envelope('/d/dl/file.txt?sign=abc:'), 401, 'expire missing');
    expectCode(await envelope('/d/dl/file.txt?sign=abc:soon'), 401, 'expire invalid');
    expectCode(await envelope(`/d/dl/file.txt?sign=${sign('/dl/other.txt')}`), 401, 'sign invalid');
    expectCode(await envelope(`/p/dl/file.txt?sign=${sign('/dl/file.txt', 1000)}`), 401, 'sign expired');
    const future = Math.floor(Date.now() / 1000) + 3600;
    expect((await get(`/d/dl/file.txt?sign=${sign('/dl/file.txt', future)}`)).body.toString()).toBe(BODY);
  });

  it('a user with a base path gets signs over the absolute tree path', async () => {
    const u = await makeUser(ts, admin, 'basesign', 0, '/dl');
    const r = await list(ts, u, '/');
    const s = r.data!.content.find((e) => e.name === 'file.txt')!.sign;
    expect(s).toBe(sign('/dl/file.txt'));
    const g = await ts.api<{ raw_url: string }>('/api/fs/get', { token: u, body: { path: '/file.txt' } });
    expect(g.data!.raw_url).toBe(`${ts.url}/p/dl/file.txt?sign=${encodeURIComponent(s)}`);
    expect((await get(`/d/dl/file.txt?sign=${encodeURIComponent(s)}`)).body.toString()).toBe(BODY);
  });

  it('a trailing slash on the sign is ignored', async () => {
    expect((await get(`/d/dl/file.txt?sign=${sign('/dl/file.txt')}/`)).res.status).toBe(200);
  });

  it('a folder or a missing file answers failed link errors', async () => {
    expectCode(await envelope(`/d/dl/sub?sign=${sign('/dl/sub')}`), 500, 'failed link: not a file');
    expectCode(await envelope(`/d/dl/none.txt?sign=${sign('/dl/none.txt')}`), 500, 'failed link: failed to get file: object not found');
  });
});

describe('ranges and validators', () => {
  const url = () => `/d/dl/file.txt?sign=${sign('/dl/file.txt')}`;

  it('serves a single range with 206 and Content-Range', async () => {
    const { res, body } = await get(url(), { range: 'bytes=2-5' });
    expect(res.status).toBe(206);
    expect(body.toString()).toBe('2345');
    expect(res.headers.get('content-range')).toBe('bytes 2-5/20');
    expect(res.headers.get('content-length')).toBe('4');
    const open = await get(url(), { range: 'bytes=15-' });
    expect(open.body.toString()).toBe('fghij');
    const suffix = await get(url(), { range: 'bytes=-3' });
    expect(suffix.body.toString()).toBe('hij');
    expect(suffix.res.headers.get('content-range')).toBe('bytes 17-19/20');
    const clipped = await get(url(), { range: 'bytes=18-999' });
    expect(clipped.body.toString()).toBe('ij');
  });

  it('an unsatisfiable range is 416 with bytes */size', async () => {
    const { res } = await get(url(), { range: 'bytes=20-' });
    expect(res.status).toBe(416);
    expect(res.headers.get('content-range')).toBe('bytes */20');
  });

  it('If-None-Match and If-Modified-Since answer 304', async () => {
    const first = await get(url());
    const etag = first.res.headers.get('etag')!;
    const lm = first.res.headers.get('last-modified')!;
    expect((await get(url(), { 'if-none-match': etag })).res.status).toBe(304);
    expect((await get(url(), { 'if-none-match': '"nope"' })).res.status).toBe(200);
    expect((await get(url(), { 'if-modified-since': lm })).res.status).toBe(304);
    expect((await get(url(), { 'if-modified-since': 'Thu, 01 Jan 1998 00:00:00 GMT' })).res.status).toBe(200);
  });

  it('If-Range: a stale validator gets the whole file, a fresh one the range', async () => {
    const etag = (await get(url())).res.headers.get('etag')!;
    const fresh = await get(url(), { range: 'bytes=0-1', 'if-range': etag });
    expect(fresh.res.status).toBe(206);
    const stale = await get(url(), { range: 'bytes=0-1', 'if-range': '"0-0"' });
    expect(stale.res.status).toBe(200);
    expect(stale.body.toString()).toBe(BODY);
  });

  it('HEAD answers headers only', async () => {
    const r = await rawRequest(ts, 'HEAD', url());
    expect(r.status).toBe(200);
    expect(r.headers['content-length']).toBe('20');
    expect(r.headers.etag).toMatch(/^"/);
    expect(r.body.length).toBe(0);
    const ranged = await rawRequest(ts, 'HEAD', url(), { range: 'bytes=0-9' });
    expect(ranged.status).toBe(206);
    expect(ranged.headers['content-length']).toBe('10');
  });

  it('the stream follows a changed file', async () => {
    ok(await putFile(ts, admin, '/dl/changing.txt', 'v1'));
    const s = sign('/dl/changing.txt');
    const e1 = (await get(`/d/dl/changing.txt?sign=${s}`)).res.headers.get('etag');
    ok(await putFile(ts, admin, '/dl/changing.txt', 'version2', { 'last-modified': String(Date.now() + 5000) }));
    const r2 = await get(`/d/dl/changing.txt?sign=${s}`, { 'if-none-match': e1! });
    expect(r2.res.status).toBe(200);
    expect(r2.body.toString()).toBe('version2');
  });
});

describe('without sign_all', () => {
  beforeAll(async () => setSetting('sign_all', 'false'));
  afterAll(async () => setSetting('sign_all', 'true'));

  it('files need no sign, and list entries carry none', async () => {
    expect((await get('/d/dl/file.txt')).body.toString()).toBe(BODY);
    const r = await list(ts, admin, '/dl');
    expect(r.data!.content.find((e) => e.name === 'file.txt')!.sign).toBe('');
  });

  it('a path password requires the sign handed out by a password-holding list', async () => {
    await addMeta(ts, admin, { path: '/dl/sub', password: 'pw', p_sub: true });
    expectCode(await envelope('/d/dl/sub/inner.txt'), 401, 'expire missing');
    const u = await makeUser(ts, admin, 'signuser', 0);
    const r = await list(ts, u, '/dl/sub', { password: 'pw' });
    ok(r);
    const s = r.data!.content.find((e) => e.name === 'inner.txt')!.sign;
    expect(s).not.toBe('');
    expect((await get(`/d/dl/sub/inner.txt?sign=${encodeURIComponent(s)}`)).body.toString()).toBe('in');
  });

  it('hidden files are not served on /d or /p without a sign (decision 3); the sign a lister who sees them gets opens them', async () => {
    await addMeta(ts, admin, { path: '/hid', hide: '^secret' });
    expectCode(await envelope('/d/hid/secret.txt'), 500, 'failed link: failed to get file: object not found');
    expectCode(await envelope('/p/hid/secret.txt?sign=forged'), 401, 'expire invalid');
    expectCode(await envelope('/p/hid/secret.txt?sign=forged:0'), 401, 'sign invalid');
    expect((await get('/d/hid/shown.txt')).body.toString()).toBe('v');
    // The admin sees hidden files: fs/list and fs/get sign them although signs are off, and the
    // links work, as the web UI's preview and download need.
    const listed = (await list(ts, admin, '/hid')).data!.content;
    expect(listed.find((e) => e.name === 'shown.txt')!.sign).toBe('');
    const s = listed.find((e) => e.name === 'secret.txt')!.sign;
    expect(s).toBe(sign('/hid/secret.txt'));
    const got = await ts.api<{ sign: string; raw_url: string }>('/api/fs/get', { token: admin, body: { path: '/hid/secret.txt' } });
    expect(got.data!.sign).toBe(s);
    expect((await get(`/d/hid/secret.txt?sign=${encodeURIComponent(s)}`)).body.toString()).toBe('s');
    expect((await get(new URL(got.data!.raw_url).pathname + new URL(got.data!.raw_url).search)).body.toString()).toBe('s');
  });

  it('/d paths are absolute in the tree, not joined to a base path', async () => {
    const u = await makeUser(ts, admin, 'basedl', 0, '/dl');
    const r = await ts.api<{ raw_url: string }>('/api/fs/get', { token: u, body: { path: '/file.txt' } });
    ok(r);
    expect(r.data!.raw_url).toBe(`${ts.url}/p/dl/file.txt`);
    expect((await get('/d/dl/file.txt')).body.toString()).toBe(BODY);
  });
});

describe('down_proxy_url', () => {
  it('fs/get raw_url and /p point at the proxy; /p?d streams', async () => {
    const c = await ts.api<{ id: number }>('/api/admin/storage/create', {
      token: admin, body: { mount_path: '/mem', driver: 'Memory', addition: '{}', down_proxy_url: 'https://proxy.example/dl\nhttps://second.example' },
    });
    ok(c);
    ok(await putFile(ts, admin, '/mem/m.txt', 'mem'));
    const s = sign('/mem/m.txt');
    const g = await ts.api<{ raw_url: string; provider: string }>('/api/fs/get', { token: admin, body: { path: '/mem/m.txt' } });
    expect(g.data!.raw_url).toBe(`https://proxy.example/dl/mem/m.txt?sign=${encodeURIComponent(s)}`);
    expect(g.data!.provider).toBe('Memory');
    const p = await get(`/p/mem/m.txt?sign=${s}`);
    expect(p.res.status).toBe(302);
    expect(p.res.headers.get('location')).toBe(`https://proxy.example/dl/mem/m.txt?sign=${encodeURIComponent(s)}`);
    const d = await get(`/p/mem/m.txt?sign=${s}&d`);
    expect(d.res.status).toBe(200);
    expect(d.body.toString()).toBe('mem');
  });

  it('a download streamed from a driver raises no listener warning (it printed one per response)', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    try {
      const d = await get(`/p/mem/m.txt?sign=${sign('/mem/m.txt')}&d`);
      expect(d.body.toString()).toBe('mem');
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).toEqual([]);
  });
});

describe('hostile /d URLs', () => {
  it('bad escapes are 400, dot segments 403', async () => {
    // A URL with a bad escape is refused before routing, still with an envelope (code 400).
    const bad = await rawRequest(ts, 'GET', '/d/dl/%zz');
    expect(bad.status).toBe(200);
    const env = JSON.parse(bad.body.toString()) as { code: number; message: string };
    expect(env.code).toBe(400);
    expect(env.message).toMatch(/^invalid request: .*not a valid url/);
    expect(bad.body.toString()).not.toContain(BODY);
    const dots = await rawRequest(ts, 'GET', '/d/dl/%2e%2e/%2e%2e/etc/passwd');
    expectCode(JSON.parse(dots.body.toString()) as { code: number; message: string }, 403, 'access using relative path is not allowed');
  });
});
