/**
 * Code review of search, downloads and the HTTP plumbing: each test shows a defect found by reading
 * the code, against the real server on loopback.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWith } from '../src/sign.js';
import type { TestServer } from './harness.js';
import { mkdir, ok, putFile, rawRequest, seed, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;
const sign = (path: string) => signWith(ts.running.core.settings.get('token'), path, 0);

interface Hit { parent: string; name: string }
const search = async (keywords: string) => {
  const r = await ts.api<{ content: Hit[]; total: number }>('/api/fs/search', {
    token: admin, body: { parent: '/', keywords, scope: 0, page: 1, per_page: 100, password: '' },
  });
  ok(r);
  return r.data!.content.map((h) => (h.parent === '/' ? '' : h.parent) + '/' + h.name).sort();
};

async function until<T>(fn: () => Promise<T>, good: (v: T) => boolean): Promise<T> {
  for (let i = 0; ; i++) {
    const v = await fn();
    if (good(v) || i >= 100) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  await seed(ts, admin, { '/dl/empty.txt': '' });
});
afterAll(async () => ts?.close());

describe('/d and /p ranges', () => {
  it('a Range on an empty file answers the (empty) file with 200, as AList does, not 416', async () => {
    // Players and download managers send `Range: bytes=0-` with every request; a 416 failed them.
    for (const kind of ['d', 'p']) {
      for (const method of ['GET', 'HEAD']) {
        const r = await rawRequest(ts, method, `/${kind}/dl/empty.txt?sign=${sign('/dl/empty.txt')}`, { range: 'bytes=0-' });
        expect({ kind, method, status: r.status, range: r.headers['content-range'], length: r.headers['content-length'] })
          .toEqual({ kind, method, status: 200, range: undefined, length: '0' });
        expect(r.body.length).toBe(0);
      }
    }
  });
});

describe('search index scope after a copy or move', () => {
  beforeAll(async () => {
    ok(await ts.api('/api/admin/setting/save', {
      token: admin,
      body: [
        { key: 'search_index', value: 'database' },
        { key: 'ignore_paths', value: '/proj/app/node_modules\n/mem/ign' },
        { key: 'max_index_depth', value: '4' },
      ],
    }));
    // A storage that reports no outside changes (Local's watch would list a folder moved in by itself).
    ok(await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path: '/mem', driver: 'Memory' } }));
    await seed(ts, admin, { '/proj/old/node_modules/libzz.js': 'x', '/mem/ign/box/inner/arrivedzz.txt': 'a' });
    ok(await mkdir(ts, admin, '/d1/d2/d3'));
    ok(await ts.api('/api/admin/index/build', { token: admin, body: {} }));
    const p = await until(() => ts.api<{ is_done: boolean }>('/api/admin/index/progress', { token: admin }), (r) => !!r.data?.is_done);
    expect(p.data?.is_done).toBe(true);
  });

  it('rows carried past max_index_depth or below an ignored path are not indexed there', async () => {
    expect(await search('libzz')).toEqual(['/proj/old/node_modules/libzz.js']);
    // Copied one level deeper: the folder (depth 4) is indexed, the file (depth 5) is past the limit.
    ok(await ts.api('/api/fs/copy', { token: admin, body: { src_dir: '/proj/old', dst_dir: '/d1/d2/d3', names: ['node_modules'] } }));
    expect(await until(() => search('node_modules'), (h) => h.length === 2)).toEqual(['/d1/d2/d3/node_modules', '/proj/old/node_modules']);
    expect(await search('libzz')).toEqual(['/proj/old/node_modules/libzz.js']);
    // Renamed to where ignore_paths names its node_modules: nothing below that line is searchable.
    ok(await ts.api('/api/fs/rename', { token: admin, body: { path: '/proj/old', name: 'app' } }));
    expect(await until(() => search('app'), (h) => h.length > 0)).toEqual(['/proj/app']);
    expect(await search('libzz')).toEqual([]);
    expect(await search('node_modules')).toEqual(['/d1/d2/d3/node_modules']);
  });

  it('a folder moved out of an ignored path gets its content indexed, not just its own name', async () => {
    expect(await search('arrivedzz')).toEqual([]);
    ok(await ts.api('/api/fs/move', { token: admin, body: { src_dir: '/mem/ign', dst_dir: '/mem', names: ['box'] } }));
    expect(await until(() => search('arrivedzz'), (h) => h.length > 0)).toEqual(['/mem/box/inner/arrivedzz.txt']);
    expect(await search('inner')).toEqual(['/mem/box/inner']);
  });
});

describe('site_url given as a bare path', () => {
  it('a prefix with a space or non-ASCII serves requests, whose URLs carry it percent-encoded', async () => {
    // `https://nas/my files` worked (the URL parser encodes its path); `/my files` never matched.
    for (const [site, prefix] of [['/my files', '/my%20files'], ['/über', '/%C3%BCber']] as const) {
      const tg = await startRestServer({ TREEGATE_SITE_URL: site });
      try {
        const settings = await rawRequest(tg, 'GET', `${prefix}/api/public/settings`);
        expect({ site, status: settings.status, type: settings.headers['content-type'] }).toMatchObject({ site, status: 200, type: expect.stringMatching(/json/) });
        const token = await tg.login();
        ok(await putFile(tg, token, '/hello.txt', 'hello'));
        const sig = signWith(tg.running.core.settings.get('token'), '/hello.txt', 0);
        const file = await rawRequest(tg, 'GET', `${prefix}/d/hello.txt?sign=${sig}`);
        expect({ site, status: file.status, body: file.body.toString() }).toEqual({ site, status: 200, body: 'hello' });
      } finally {
        await tg.close();
      }
    }
  });
});
