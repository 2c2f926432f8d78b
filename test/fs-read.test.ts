/** fs/list, fs/get, fs/dirs, fs/search over the real server (alist-compat §9, decision 1). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { addMeta, expectCode, list, makeUser, mkdir, ok, PERM, seed, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  await seed(ts, admin, {
    '/r/a.mp3': 'aa', '/r/b.mp4': 'bbb', '/r/c.png': 'c', '/r/d.txt': 'dddd', '/r/e.bin': 'e',
    '/r/sub/x.txt': 'x', '/page/1.txt': '1', '/page/2.txt': '2', '/page/3.txt': '3', '/page/h1.txt': 'h', '/page/4.txt': '4',
  });
  ok(await mkdir(ts, admin, '/emptydir'));
  await addMeta(ts, admin, { path: '/page', hide: '^h', readme: '# hello', r_sub: false });
});
afterAll(async () => ts?.close());

describe('fs/list', () => {
  it('lists entries with AList fields and type integers', async () => {
    const r = await list(ts, admin, '/r');
    ok(r);
    const byName = Object.fromEntries(r.data!.content.map((e) => [e.name, e]));
    expect(Object.keys(byName).sort()).toEqual(['a.mp3', 'b.mp4', 'c.png', 'd.txt', 'e.bin', 'sub']);
    expect(byName['a.mp3']!.type).toBe(3);
    expect(byName['b.mp4']!.type).toBe(2);
    expect(byName['c.png']!.type).toBe(5);
    expect(byName['d.txt']!.type).toBe(4);
    expect(byName['e.bin']!.type).toBe(0);
    expect(byName.sub!.type).toBe(1);
    expect(byName.sub!.size).toBe(0);
    expect(byName['d.txt']!.size).toBe(4);
    const e = r.data!.content[0]! as unknown as Record<string, unknown>;
    for (const k of ['name', 'size', 'is_dir', 'modified', 'created', 'sign', 'thumb', 'type', 'hashinfo', 'hash_info']) expect(e).toHaveProperty(k);
    expect(String(e.modified)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)$/);
    expect(r.data!.provider).toBe('Local');
    expect(r.data!.write).toBe(true);
    expect(r.data!.total).toBe(6);
  });

  it('signs files (sign_all defaults to true) but not folders', async () => {
    const r = await list(ts, admin, '/r');
    for (const e of r.data!.content) {
      if (e.is_dir) expect(e.sign).toBe('');
      else expect(e.sign).toMatch(/^[A-Za-z0-9_-]{43}=:0$/);
    }
  });

  it('answers content [] (never null) for an empty folder', async () => {
    const r = await list(ts, admin, '/emptydir');
    ok(r);
    expect(r.data!.content).toEqual([]);
    expect(r.data!.total).toBe(0);
  });

  it('pages after hiding; page<1 is 1 and per_page<1 is everything', async () => {
    const user = await makeUser(ts, admin, 'pager', 0);
    const all = await list(ts, user, '/page');
    expect(all.data!.content.map((e) => e.name)).toEqual(['1.txt', '2.txt', '3.txt', '4.txt']);
    expect(all.data!.total).toBe(4);
    expect(all.data!.readme).toBe('# hello');
    const p2 = await list(ts, user, '/page', { page: 2, per_page: 3 });
    expect(p2.data!.content.map((e) => e.name)).toEqual(['4.txt']);
    expect(p2.data!.total).toBe(4);
    const p0 = await list(ts, user, '/page', { page: 0, per_page: 2 });
    expect(p0.data!.content.map((e) => e.name)).toEqual(['1.txt', '2.txt']);
    const beyond = await list(ts, user, '/page', { page: 9, per_page: 2 });
    expect(beyond.data!.content).toEqual([]);
    // the admin sees hidden entries (bit 0)
    expect((await list(ts, admin, '/page')).data!.total).toBe(5);
  });

  it('readme without r_sub does not reach subfolders', async () => {
    ok(await mkdir(ts, admin, '/page/deeper'));
    const r = await list(ts, admin, '/page/deeper');
    expect(r.data!.readme).toBe('');
  });

  it('refresh needs write: 403 Refresh without permission', async () => {
    const reader = await makeUser(ts, admin, 'reader', 0);
    expectCode(await list(ts, reader, '/r', { refresh: true }), 403, 'Refresh without permission');
    ok(await list(ts, admin, '/r', { refresh: true }));
    const r = await list(ts, reader, '/r');
    expect(r.data!.write).toBe(false);
  });

  it('missing folder answers 500 object not found; a file is not a folder', async () => {
    const r = await list(ts, admin, '/nope');
    expect(r.code).toBe(500);
    expect(r.message).toMatch(/object not found$/);
    expect((await list(ts, admin, '/r/d.txt')).code).toBe(500);
  });

  it('accepts GET with query fields like AList', async () => {
    const r = await ts.api<{ total: number }>('/api/fs/list?path=%2Fr', { token: admin });
    ok(r);
    expect(r.data!.total).toBe(6);
  });

  it('a user sees the tree from their base path', async () => {
    const u = await makeUser(ts, admin, 'based', 0, '/r');
    const r = await list(ts, u, '/');
    expect(r.data!.content.map((e) => e.name).sort()).toEqual(['a.mp3', 'b.mp4', 'c.png', 'd.txt', 'e.bin', 'sub']);
  });
});

describe('fs/get', () => {
  it('answers an entry with raw_url, provider and related null', async () => {
    const r = await ts.api<Record<string, unknown>>('/api/fs/get', { token: admin, body: { path: '/r/d.txt', password: '' } });
    ok(r);
    const d = r.data!;
    expect(d.name).toBe('d.txt');
    expect(d.size).toBe(4);
    expect(d.type).toBe(4);
    expect(d.provider).toBe('Local');
    expect(d.related).toBeNull();
    expect(d.readme).toBe('');
    expect(d.header).toBe('');
    expect(String(d.sign)).toMatch(/=:0$/);
    expect(d.raw_url).toBe(`${ts.url}/p/r/d.txt?sign=${encodeURIComponent(String(d.sign))}`);
    const body = await (await fetch(String(d.raw_url))).text();
    expect(body).toBe('dddd');
  });

  it('escapes each path segment of raw_url; X-Forwarded-Host counts only from trusted proxies', async () => {
    await seed(ts, admin, { '/r/spaced name #1.txt': 'z' });
    const fwd = { 'x-forwarded-host': 'files.example', 'x-forwarded-proto': 'https' };
    const r = await ts.api<{ raw_url: string }>('/api/fs/get', { token: admin, body: { path: '/r/spaced name #1.txt' }, headers: fwd });
    expect(r.data!.raw_url.startsWith(`${ts.url}/p/r/spaced%20name%20%231.txt?sign=`)).toBe(true);
    const proxied = await startRestServer({ TREEGATE_TRUSTED_PROXIES: '127.0.0.1' });
    try {
      const t = await proxied.login();
      await seed(proxied, t, { '/q.txt': 'q' });
      const g = await proxied.api<{ raw_url: string }>('/api/fs/get', { token: t, body: { path: '/q.txt' }, headers: fwd });
      expect(g.data!.raw_url.startsWith('https://files.example/p/q.txt?sign=')).toBe(true);
    } finally {
      await proxied.close();
    }
  });

  it('a folder has an empty raw_url and a name-derived type', async () => {
    const r = await ts.api<{ raw_url: string; type: number; is_dir: boolean; sign: string }>('/api/fs/get', { token: admin, body: { path: '/r/sub' } });
    ok(r);
    expect(r.data!.is_dir).toBe(true);
    expect(r.data!.raw_url).toBe('');
    expect(r.data!.sign).toBe('');
    expect(r.data!.type).toBe(0);
  });

  it('missing object: 500 object not found', async () => {
    expectCode(await ts.api('/api/fs/get', { token: admin, body: { path: '/r/none.txt' } }), 500, 'object not found');
  });

  it('a hidden entry is not found for users without bit 0', async () => {
    const u = await makeUser(ts, admin, 'nohide', 0);
    expectCode(await ts.api('/api/fs/get', { token: u, body: { path: '/page/h1.txt' } }), 500, 'object not found');
  });
});

describe('fs/dirs', () => {
  it('lists only folders, [] when there are none', async () => {
    const r = await ts.api<Array<{ name: string; modified: string }>>('/api/fs/dirs', { token: admin, body: { path: '/r' } });
    ok(r);
    expect(r.data!.map((d) => d.name)).toEqual(['sub']);
    expect(Object.keys(r.data![0]!).sort()).toEqual(['modified', 'name']);
    const none = await ts.api('/api/fs/dirs', { token: admin, body: { path: '/r/sub' } });
    expect(none.data).toEqual([]);
  });

  it('force_root is admin only; for the admin it ignores the base path', async () => {
    const u = await makeUser(ts, admin, 'dirsuser', PERM.WRITE, '/r');
    expectCode(await ts.api('/api/fs/dirs', { token: u, body: { path: '/', force_root: true } }), 403, 'Permission denied');
    const own = await ts.api<Array<{ name: string }>>('/api/fs/dirs', { token: u, body: { path: '/' } });
    expect(own.data!.map((d) => d.name)).toEqual(['sub']);
    const r = await ts.api<Array<{ name: string }>>('/api/fs/dirs', { token: admin, body: { path: '/', force_root: true } });
    expect(r.data!.map((d) => d.name)).toContain('r');
  });
});

describe('fs/search', () => {
  it('answers 500 search not available while search_index is none', async () => {
    expectCode(
      await ts.api('/api/fs/search', { token: admin, body: { parent: '/', keywords: 'a', scope: 0, page: 1, per_page: 10, password: '' } }),
      500,
      'search not available',
    );
  });
});

describe('auth', () => {
  it('fs routes need an identity (guest disabled → 401)', async () => {
    expectCode(await list(ts, '', '/'), 401, 'Guest user is disabled, login please');
  });
});
