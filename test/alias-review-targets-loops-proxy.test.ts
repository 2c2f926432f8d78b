/**
 * Second code review of the Alias driver (drivers/alias) and how the VFS resolves through it, each
 * defect proven against the real server on loopback:
 * - the tree path of a destination not there yet (Driver.treePath) was the first target's, though a
 *   write goes to the target holding its folder: a folder copied or moved into its own subfolder
 *   through a merged alias whose later target holds it was not refused (copy tasks without end,
 *   WebDAV MOVE copying the folder into itself);
 * - protect_same_name let a remove or rename through when a target's backend was down: the name
 *   held there too was not seen, and the copy in the other target was the one removed;
 * - an alias met a second time on a call chain was taken for a loop: with /all an alias of `/` and
 *   /fav one of /all/la/fav, /fav listed but /all/fav answered "alias paths lead back into the alias";
 * - a storage set to proxy (web_proxy) shown through an alias: the alias's /d redirected the client
 *   to the backend's own URL (S3's presigned one), which the storage was set to keep from clients;
 *   AList's alias links to the storage's /p instead;
 * - a target whose init failed (its remote down at startup) was left out of a merged listing as a
 *   disabled one is: its files vanished from the listing instead of the listing failing;
 * - a WebDAV MOVE out of a read-only alias into another storage copied the file, then answered 405
 *   when removing the source (checkTransfer did not ask whether the source storage can remove).
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';
import { names, ok, putFile, startRestServer } from './fs-helpers.js';
import { addLocalStorage } from './tasks-helpers.js';
import { createStorage, startRemoteServers } from './remote-servers.js';
import { signWith } from '../src/sign.js';

let s: TestServer;
let admin: string;
let dav: DavClient;
let la: string;
let lb: string;

beforeAll(async () => {
  s = await startRestServer();
  admin = await s.login();
  dav = davClient(s.url, 'admin', ADMIN_PASSWORD);
  la = await addLocalStorage(s, admin, '/la');
  lb = await addLocalStorage(s, admin, '/lb');
  // One name, two targets: the alias root merges /la and /lb.
  ok(await createStorage(s, admin, '/m', 'Alias', { paths: 'm:/la\nm:/lb', writable: true }));
}, 60_000);

afterAll(async () => {
  await s?.close();
  await Promise.all([la, lb].filter(Boolean).map((d) => rm(d, { recursive: true, force: true })));
});

describe('a transfer into its own subfolder through a merged alias whose later target holds the folder', () => {
  it('REST copy is refused (no copy tasks copying the folder into itself)', async () => {
    await mkdir(join(lb, 'rc'));
    await writeFile(join(lb, 'rc', 'f.txt'), 'x');
    const r = await s.api('/api/fs/copy', { token: admin, body: { src_dir: '/lb', dst_dir: '/m/rc', names: ['rc'] } });
    expect(r).toMatchObject({ message: 'the destination folder is a subfolder of the source folder' });
    expect(existsSync(join(lb, 'rc', 'rc'))).toBe(false);
  });

  it('WebDAV MOVE is refused and leaves the folder as it was', async () => {
    await mkdir(join(lb, 'wm'));
    await writeFile(join(lb, 'wm', 'f.txt'), 'kept');
    const res = await dav('MOVE', '/lb/wm', { headers: { Destination: `${s.url}/dav/m/wm/wm` } });
    expect(await readdir(join(lb, 'wm')), `${res.status}`).toEqual(['f.txt']);
    expect(await readFile(join(lb, 'wm', 'f.txt'), 'utf8')).toBe('kept');
    expect(res.status).toBeGreaterThanOrEqual(400);
  });
});

describe('an alias met again on the way, without a loop', () => {
  it('lists: /all (an alias of /) shows /fav (an alias of /all/la/fav) as /fav does; a real loop is still refused', async () => {
    await mkdir(join(la, 'fav'));
    await writeFile(join(la, 'fav', 'f.txt'), 'x');
    ok(await createStorage(s, admin, '/all', 'Alias', { paths: '/' }));
    ok(await createStorage(s, admin, '/fav', 'Alias', { paths: '/all/la/fav' }));
    ok(await createStorage(s, admin, '/loop', 'Alias', { paths: '/loop/x' }));
    expect(await names(s, admin, '/fav')).toEqual(['f.txt']);
    const r = await s.api<{ content: Array<{ name: string }> }>('/api/fs/list', { token: admin, body: { path: '/all/fav' } });
    expect(r.message).toBe('success');
    expect(r.data?.content.map((e) => e.name)).toEqual(['f.txt']);
    expect(await s.api('/api/fs/list', { token: admin, body: { path: '/loop' } })).toMatchObject({ code: 400, message: 'alias paths lead back into the alias itself' });
  });
});

describe('WebDAV MOVE out of a read-only alias into another storage', () => {
  it('is refused before the copy: the file is not left in both places', async () => {
    ok(await createStorage(s, admin, '/ro', 'Alias', { paths: '/la' }));
    await writeFile(join(la, 'ro.txt'), 'stays');
    const res = await dav('MOVE', '/ro/ro.txt', { headers: { Destination: `${s.url}/dav/lb/ro.txt` } });
    expect(res.status).toBe(405);
    expect(existsSync(join(lb, 'ro.txt'))).toBe(false);
    expect(await readFile(join(la, 'ro.txt'), 'utf8')).toBe('stays');
  });
});

describe('a download through an alias of a storage that proxies (web_proxy)', () => {
  it('is served through treegate as the storage serves it, not redirected to the backend', async () => {
    const remote = await startRemoteServers(['S3']);
    try {
      ok(await createStorage(s, admin, '/s3p', 'S3', remote.additionOf('S3'), { web_proxy: true }));
      ok(await putFile(s, admin, '/s3p/f.txt', 'proxied bytes'));
      ok(await createStorage(s, admin, '/s3a', 'Alias', { paths: '/s3p' }));
      const token = s.running.core.settings.get('token');
      const direct = await fetch(`${s.url}/d/s3p/f.txt?sign=${signWith(token, '/s3p/f.txt', 0)}`, { redirect: 'manual' });
      expect(direct.status).toBe(200);
      await direct.arrayBuffer();
      const res = await fetch(`${s.url}/d/s3a/f.txt?sign=${signWith(token, '/s3a/f.txt', 0)}`, { redirect: 'manual' });
      expect(res.status, res.headers.get('location') ?? '').toBe(200);
      expect(await res.text()).toBe('proxied bytes');
    } finally {
      await remote.stop();
    }
  }, 60_000);
});

describe('protect_same_name while a target is down', () => {
  let b: TestServer | undefined;
  let downUrl = '';
  beforeAll(async () => {
    b = await startRestServer();
    downUrl = b.url;
    ok(await putFile(b, await b.login(), '/same.txt', 'remote copy'));
    ok(await createStorage(s, admin, '/wd', 'WebDav', { address: `${b.url}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/' }));
    await writeFile(join(la, 'same.txt'), 'local copy');
    ok(await createStorage(s, admin, '/pw', 'Alias', { paths: 'p:/la\np:/wd', writable: true }));
    // Both targets hold same.txt: protected.
    expect((await s.api('/api/fs/remove', { token: admin, body: { dir: '/pw', names: ['same.txt'] } })).code).toBe(403);
    await b.close();
    b = undefined;
  }, 60_000);
  afterAll(async () => {
    await b?.close();
  });

  it('a listing merging a target that failed to init (its remote was down) fails, as one whose remote fails', async () => {
    // The WebDav storage is created (as at a restart) while its remote is down: its init fails.
    const created = await createStorage(s, admin, '/wd-down', 'WebDav', { address: `${downUrl}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/' });
    expect(created.code).not.toBe(200);
    ok(await createStorage(s, admin, '/pi', 'Alias', { paths: 'p:/la\np:/wd-down' }));
    const r = await s.api('/api/fs/list', { token: admin, body: { path: '/pi', refresh: true } });
    expect(r).toMatchObject({ code: 500, data: null });
    // Disabled by the admin, it is left out as before.
    const all = await s.api<{ content: Array<{ id: number; mount_path: string }> }>('/api/admin/storage/list', { token: admin });
    const id = all.data!.content.find((x) => x.mount_path === '/wd-down')!.id;
    ok(await s.api(`/api/admin/storage/disable?id=${id}`, { token: admin, method: 'POST' }));
    expect(await names(s, admin, '/pi')).toContain('same.txt');
  });

  it('a remove or rename of a name the down target may hold is refused, not applied to the other copy', async () => {
    const rm1 = await s.api('/api/fs/remove', { token: admin, body: { dir: '/pw', names: ['same.txt'] } });
    const rn = await s.api('/api/fs/rename', { token: admin, body: { path: '/pw/same.txt', name: 'other.txt' } });
    expect(await readFile(join(la, 'same.txt'), 'utf8')).toBe('local copy');
    expect(rm1.code, rm1.message).not.toBe(200);
    expect(rn.code, rn.message).not.toBe(200);
  });
});
