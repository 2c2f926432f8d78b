/**
 * Adversarial probes of the REST fs adapter (protocols/rest): edge cases where treegate once
 * diverged from AList or lost data. Each test names the request and the answer AList gives.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWith } from '../src/sign.js';
import type { TestServer } from './harness.js';
import { addMeta, ALL_FS, expectCode, makeUser, mkdir, ok, rawRequest, seed, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;
const disk = (p: string) => join(ts.dataDir, 'storage', p);
const post = (path: string, body: unknown, token = admin) => ts.api(path, { token, body });
const tree = (p: string) => readdirSync(disk(p), { recursive: true }).map(String).sort();

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
afterAll(async () => ts?.close());

describe('remove_empty_directory', () => {
  it('keeps a folder whose only entries the caller cannot see (meta hide): nothing hidden is deleted', async () => {
    await seed(ts, admin, { '/red/box/secret.txt': 's', '/red/keep/a': 'a' });
    await mkdir(ts, admin, '/red/empty/inner');
    await addMeta(ts, admin, { path: '/red', hide: 'secret', h_sub: true });
    const u = await makeUser(ts, admin, 'red-user', ALL_FS);
    ok(await post('/api/fs/remove_empty_directory', { src_dir: '/red' }, u));
    expect(existsSync(disk('red/box/secret.txt'))).toBe(true);
    expect(tree('red')).toEqual(['box', 'box/secret.txt', 'keep', 'keep/a']);
  });
});

describe('recursive_move', () => {
  it('src_dir == dst_dir with cancel flattens the subfolders; files already there are not conflicts', async () => {
    await seed(ts, admin, { '/rs/top': 't', '/rs/sub/inner': 'i' });
    ok(await post('/api/fs/recursive_move', { src_dir: '/rs', dst_dir: '/rs', conflict_policy: 'cancel' }));
    expect(tree('rs')).toEqual(['inner', 'sub', 'top']);
  });

  it('cancel refuses before anything moves when two files of the batch share a name', async () => {
    await seed(ts, admin, { '/rc/x/dup': '1', '/rc/y/dup': '2', '/rc/y/other': 'o' });
    await mkdir(ts, admin, '/rcd');
    expectCode(await post('/api/fs/recursive_move', { src_dir: '/rc', dst_dir: '/rcd', conflict_policy: 'cancel' }), 403, 'file [dup] exists');
    expect(tree('rcd')).toEqual([]);
    expect(tree('rc')).toEqual(['x', 'x/dup', 'y', 'y/dup', 'y/other']);
  });
});

describe('names longer than the file system holds (255 bytes)', () => {
  it('mkdir, put and rename answer "file name too long" and create nothing', async () => {
    await mkdir(ts, admin, '/long');
    await seed(ts, admin, { '/long/short.txt': 's' });
    const long = 'n'.repeat(256);
    expectCode(await post('/api/fs/mkdir', { path: `/long/${long}` }), 400, 'file name too long');
    const put = await fetch(`${ts.url}/api/fs/put`, { method: 'PUT', body: 'x', headers: { authorization: admin, 'file-path': encodeURIComponent(`/long/${long}`) } });
    expectCode((await put.json()) as { code: number; message: string }, 400, 'file name too long');
    expectCode(await post('/api/fs/rename', { path: '/long/short.txt', name: long }), 400, 'file name too long');
    expect(tree('long')).toEqual(['short.txt']);
  });
});

describe('routes', () => {
  it('a trailing slash reaches the route, as gin\'s redirect does for AList', async () => {
    expect(await post('/api/fs/list/', { path: '/' })).toMatchObject({ code: 200 });
    expect(await ts.api('/api/public/settings/')).toMatchObject({ code: 200 });
  });
});

describe('form bodies bind as gin binds them', () => {
  const form = async (path: string, body: string) => {
    const res = await fetch(ts.url + path, { method: 'POST', body, headers: { authorization: admin, 'content-type': 'application/x-www-form-urlencoded' } });
    return (await res.json()) as { code: number; message: string; data: unknown };
  };

  it('a single value for a list field is a list of one; a repeated scalar counts with its first value', async () => {
    await seed(ts, admin, { '/frm/a.txt': 'a', '/frm/b.txt': 'b', '/frm/c.txt': 'c' });
    ok(await form('/api/fs/remove', 'dir=/frm&names=a.txt'));
    ok(await form('/api/fs/remove', 'dir=/frm&names=b.txt&names=c.txt'));
    expect(tree('frm')).toEqual([]);
    const listed = await form('/api/fs/list', 'path=/frm&path=/elsewhere');
    expect(listed).toMatchObject({ code: 200, data: { total: 0 } });
  });

  it('JSON keeps its types strictly: a list where a string belongs is still a 400', async () => {
    expectCode(await post('/api/fs/list', { path: ['/'] }), 400, 'invalid request: path must be a string');
    expectCode(await post('/api/fs/remove', { dir: '/', names: 'x' }), 400, 'invalid request: names must be an array of strings');
  });
});

describe('regex_rename', () => {
  it('a src_name_regex that is not a string is a 400 like any bad field, not a 500 regexp error', async () => {
    await mkdir(ts, admin, '/rr');
    expectCode(await post('/api/fs/regex_rename', { src_dir: '/rr', src_name_regex: 5, new_name_regex: 'x' }), 400, 'invalid request: src_name_regex must be a string');
  });
});

describe('upload Last-Modified', () => {
  const put = async (path: string, lastModified: string) => {
    const r = await rawRequest(ts, 'PUT', '/api/fs/put', { authorization: admin, 'file-path': path, 'last-modified': lastModified }, Buffer.from('x'));
    return JSON.parse(r.body.toString()) as { code: number; message: string };
  };

  it('a time past what a Date holds is "now", not a refused upload', async () => {
    const before = Date.now() - 5000;
    ok(await put('/lm/huge', '8700000000000000'));
    expect(statSync(disk('lm/huge')).mtimeMs).toBeGreaterThan(before);
  });

  it('only digits count, as Go strconv.ParseInt reads them: 1e12 and 0x10 are now', async () => {
    const before = Date.now() - 5000;
    ok(await put('/lm/exp', '1e12'));
    ok(await put('/lm/hex', '0x10'));
    expect(statSync(disk('lm/exp')).mtimeMs).toBeGreaterThan(before);
    expect(statSync(disk('lm/hex')).mtimeMs).toBeGreaterThan(before);
    ok(await put('/lm/ms', '1600000000000'));
    expect(statSync(disk('lm/ms')).mtimeMs).toBe(1600000000000);
  });
});

describe('/d preconditions (Go ServeContent: If-Match, If-Unmodified-Since → 412)', () => {
  const url = () => `/d/pre/f.txt?sign=${signWith(ts.running.core.settings.get('token'), '/pre/f.txt', 0)}`;
  const get = (headers: Record<string, string>) => rawRequest(ts, 'GET', url(), headers);

  it('If-Match with another or a weak validator is 412 and sends no bytes; the ETag or * serves the file', async () => {
    await seed(ts, admin, { '/pre/f.txt': '0123456789' });
    const etag = (await get({})).headers.etag as string;
    for (const im of ['"nope"', `W/${etag}`]) {
      const r = await get({ 'if-match': im, range: 'bytes=0-3' });
      expect(r.status).toBe(412);
      expect(r.body.length).toBe(0);
    }
    expect((await get({ 'if-match': `"x", ${etag}` })).status).toBe(200);
    expect((await get({ 'if-match': '*', range: 'bytes=0-3' })).status).toBe(206);
  });

  it('If-Unmodified-Since before the file changed is 412; at or after it the file is served', async () => {
    const lm = (await get({})).headers['last-modified'] as string;
    expect((await get({ 'if-unmodified-since': 'Thu, 01 Jan 1998 00:00:00 GMT' })).status).toBe(412);
    expect((await get({ 'if-unmodified-since': lm })).status).toBe(200);
    expect((await get({ 'if-unmodified-since': 'garbage' })).status).toBe(200);
  });
});

describe('admin bodies', () => {
  it('set_aria2 with a uri that is not a string is a 400, not a failed aria2 call', async () => {
    expectCode(await post('/api/admin/setting/set_aria2', { uri: 5, secret: '' }), 400, 'invalid request: uri must be a string');
  });
});
