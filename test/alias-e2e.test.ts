/**
 * The Alias driver over the real VFS, driven through REST (and WebDAV for reads and a refused
 * write): two Local storages shown again by Alias storages in both `paths` forms. Writes follow
 * `writable` and `protect_same_name` as in AList 3.45, and the targets' meta rules keep applying
 * through the alias (the tree principal neither sees hidden entries nor skips passwords), even for
 * an admin who could see or open them directly.
 */
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { addMeta, list, names, ok, putFile, startRestServer } from './fs-helpers.js';
import { addLocalStorage } from './tasks-helpers.js';

let ts: TestServer;
let admin: string;
let la: string;
let lb: string;

const alias = async (mount_path: string, addition: Record<string, unknown>) =>
  ok(await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path, driver: 'Alias', addition: JSON.stringify(addition) } }));
const read = async (path: string) => {
  const r = await ts.api<{ raw_url: string }>('/api/fs/get', { token: admin, body: { path } });
  ok(r);
  const res = await fetch(r.data!.raw_url);
  expect(res.status).toBe(200);
  return res.text();
};
const remove = (dir: string, name: string) => ts.api('/api/fs/remove', { token: admin, body: { dir, names: [name] } });
const dav = (method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
  fetch(`${ts.url}/dav${path}`, {
    method, body, headers: { authorization: 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64'), ...headers },
  });

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  la = await addLocalStorage(ts, admin, '/la');
  lb = await addLocalStorage(ts, admin, '/lb');
  await mkdir(join(la, 'docs'));
  await mkdir(join(lb, 'locked'));
  await Promise.all([
    writeFile(join(la, 'same.txt'), 'from a'), writeFile(join(la, 'a-only.txt'), 'only a'), writeFile(join(la, 'secret.txt'), 'hidden'),
    writeFile(join(la, 'docs', 'readme.md'), '# docs'),
    writeFile(join(lb, 'same.txt'), 'from b'), writeFile(join(lb, 'b-only.txt'), 'only b'), writeFile(join(lb, 'locked', 'inside.txt'), 'locked'),
  ]);
  await addMeta(ts, admin, { path: '/la', hide: '^secret' });
  await addMeta(ts, admin, { path: '/lb/locked', password: 'pw', p_sub: true });
  await alias('/al', { paths: '/la\n/lb' });
  await alias('/merged', { paths: 'docs:/la\ndocs:/lb' });
  await alias('/mw', { paths: 'docs:/la\ndocs:/lb', writable: true });
  await alias('/loose', { paths: 'docs:/la\ndocs:/lb', writable: true, protect_same_name: false });
}, 30_000);
afterAll(async () => {
  await ts?.close();
  await Promise.all([la, lb].filter(Boolean).map((d) => rm(d, { recursive: true, force: true })));
});

describe('reading through an alias', () => {
  it('`/path` lines become one folder each, named after the target', async () => {
    expect(await names(ts, admin, '/al')).toEqual(['la', 'lb']);
    expect(await names(ts, admin, '/al/lb')).toEqual(['b-only.txt', 'locked', 'same.txt']);
    expect(await read('/al/la/docs/readme.md')).toBe('# docs');
    expect((await list(ts, admin, '/al')).data!.provider).toBe('Alias');
  });

  it('`name:/path` lines with one name merge the targets; the first target wins a shared name', async () => {
    expect(await names(ts, admin, '/merged')).toEqual(['a-only.txt', 'b-only.txt', 'docs', 'locked', 'same.txt']);
    expect(await read('/merged/same.txt')).toBe('from a');
    expect(await read('/merged/b-only.txt')).toBe('only b');
  });

  it('over WebDAV too: PROPFIND lists, GET reads', async () => {
    const pf = await dav('PROPFIND', '/al/la/', { depth: '1' });
    expect(pf.status).toBe(207);
    const xml = await pf.text();
    expect(xml).toContain('a-only.txt');
    expect(xml).not.toContain('secret.txt');
    const get = await dav('GET', '/merged/same.txt');
    expect(get.status).toBe(200);
    expect(await get.text()).toBe('from a');
  });
});

describe("the targets' meta rules apply through the alias", () => {
  it('a hidden entry is absent from alias listings and cannot be read, though the admin sees it directly', async () => {
    expect(await names(ts, admin, '/la')).toContain('secret.txt');
    expect(await names(ts, admin, '/al/la')).not.toContain('secret.txt');
    expect(await names(ts, admin, '/merged')).not.toContain('secret.txt');
    const r = await ts.api('/api/fs/get', { token: admin, body: { path: '/al/la/secret.txt' } });
    expect(r).toMatchObject({ code: 500, message: 'object not found' });
  });

  it('a password-protected folder is refused through the alias, even with its password', async () => {
    ok(await list(ts, admin, '/lb/locked', { password: 'pw' }));
    for (const path of ['/al/lb/locked', '/merged/locked']) {
      for (const password of ['', 'pw']) {
        expect(await list(ts, admin, path, { password, refresh: true })).toMatchObject({ code: 403, message: 'password is incorrect or you have no permission' });
      }
    }
    expect((await ts.api('/api/fs/get', { token: admin, body: { path: '/al/lb/locked/inside.txt', password: 'pw' } })).code).toBe(403);
  });
});

describe('writing through an alias', () => {
  it('is refused unless `writable` is on (REST and WebDAV)', async () => {
    expect((await putFile(ts, admin, '/merged/docs/new.txt', 'x')).code).not.toBe(200);
    expect((await remove('/merged', 'a-only.txt')).code).not.toBe(200);
    expect((await dav('PUT', '/al/la/dav.txt', {}, 'x')).status).toBeGreaterThanOrEqual(400);
    expect(await readdir(join(la, 'docs'))).toEqual(['readme.md']);
    expect(await readdir(la)).not.toContain('dav.txt');
    expect(await readdir(la)).toContain('a-only.txt');
  });

  it('writable: writes go to the one target holding the folder or file', async () => {
    ok(await putFile(ts, admin, '/mw/docs/new.txt', 'through the alias'));
    expect(await readFile(join(la, 'docs', 'new.txt'), 'utf8')).toBe('through the alias');
    ok(await ts.api('/api/fs/mkdir', { token: admin, body: { path: '/mw/docs/made' } }));
    expect((await readdir(join(la, 'docs'))).sort()).toEqual(['made', 'new.txt', 'readme.md']);
    ok(await ts.api('/api/fs/rename', { token: admin, body: { path: '/mw/b-only.txt', name: 'b-renamed.txt' } }));
    expect((await readdir(lb)).sort()).toEqual(['b-renamed.txt', 'locked', 'same.txt']);
    ok(await remove('/mw', 'b-renamed.txt'));
    expect((await readdir(lb)).sort()).toEqual(['locked', 'same.txt']);
  });

  it('protect_same_name (default on) refuses delete, rename and writes into names both targets hold', async () => {
    expect(await remove('/mw', 'same.txt')).toMatchObject({ code: 403, message: 'same-name files cannot be Rename/Delete' });
    expect((await ts.api('/api/fs/rename', { token: admin, body: { path: '/mw/same.txt', name: 'x.txt' } })).code).toBe(403);
    expect((await putFile(ts, admin, '/mw/root-file.txt', 'x')).code).toBe(403);
    expect(await readFile(join(la, 'same.txt'), 'utf8')).toBe('from a');
    expect(await readFile(join(lb, 'same.txt'), 'utf8')).toBe('from b');
  });

  it('protect_same_name off: the first target takes the write; its shared name then shows the next one', async () => {
    ok(await putFile(ts, admin, '/loose/root-file.txt', 'to the first target'));
    expect(await readFile(join(la, 'root-file.txt'), 'utf8')).toBe('to the first target');
    ok(await remove('/loose', 'same.txt'));
    expect(await readdir(la)).not.toContain('same.txt');
    expect(await readFile(join(lb, 'same.txt'), 'utf8')).toBe('from b');
    expect(await read('/merged/same.txt')).toBe('from b');
  });
});
