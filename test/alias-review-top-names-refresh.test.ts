/**
 * Review of meta rules and the Alias driver: defects found by reading the code, each shown against
 * the real server over loopback.
 */
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { names, ok, putFile, startRestServer } from './fs-helpers.js';
import { addLocalStorage } from './tasks-helpers.js';

let ts: TestServer;
let admin: string;
let la: string;
let lb: string;

const alias = async (mount_path: string, addition: Record<string, unknown>) =>
  ok(await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path, driver: 'Alias', addition: JSON.stringify(addition) } }));

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  la = await addLocalStorage(ts, admin, '/la');
  lb = await addLocalStorage(ts, admin, '/lb');
}, 30_000);
afterAll(async () => {
  await ts?.close();
  await Promise.all([la, lb].filter(Boolean).map((d) => rm(d, { recursive: true, force: true })));
});

describe('a writable alias with several names', () => {
  it('refuses to remove, rename or move a top-level name: it stands for the target folder itself (AList: not supported)', async () => {
    await mkdir(join(la, 'docs'), { recursive: true });
    await writeFile(join(la, 'docs', 'keep.txt'), 'precious');
    await mkdir(join(lb, 'pics'), { recursive: true });
    await alias('/aw', { paths: 'docs:/la/docs\npics:/lb/pics', writable: true });
    expect((await ts.api('/api/fs/remove', { token: admin, body: { dir: '/aw', names: ['docs'] } })).code).not.toBe(200);
    expect((await ts.api('/api/fs/rename', { token: admin, body: { path: '/aw/docs', name: 'gone' } })).code).not.toBe(200);
    expect((await ts.api('/api/fs/move', { token: admin, body: { src_dir: '/aw', dst_dir: '/aw/pics', names: ['docs'] } })).code).not.toBe(200);
    expect(await readdir(join(la, 'docs'))).toEqual(['keep.txt']);
    expect(await readdir(lb)).toEqual(['pics']);
    expect(await readdir(join(lb, 'pics'))).toEqual([]);
    // Inside a top-level name writes still work (AList's isParent).
    ok(await ts.api('/api/fs/mkdir', { token: admin, body: { path: '/aw/docs/sub' } }));
    expect((await readdir(join(la, 'docs'))).sort()).toEqual(['keep.txt', 'sub']);
  });
});

describe('refresh through an alias', () => {
  it('a listing with refresh reaches the cached listings of its targets (AList passes Refresh on)', async () => {
    // The target: a WebDav storage (listings cached for 30 minutes) on a second server's /dav.
    const remote = await startRestServer();
    try {
      const remoteAdmin = await remote.login();
      ok(await remote.api('/api/fs/mkdir', { token: remoteAdmin, body: { path: '/shared' } }));
      ok(await ts.api('/api/admin/storage/create', {
        token: admin,
        body: {
          mount_path: '/remote', driver: 'WebDav', cache_expiration: 30,
          addition: JSON.stringify({ address: `${remote.url}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/shared' }),
        },
      }));
      await alias('/ac', { paths: '/remote' });
      expect(await names(ts, admin, '/ac')).toEqual([]);
      ok(await putFile(remote, remoteAdmin, '/shared/late.txt', 'made on the other server'));
      expect(await names(ts, admin, '/ac')).toEqual([]); // cached, as AList's would be
      const r = await ts.api<{ content: Array<{ name: string }> | null }>('/api/fs/list', { token: admin, body: { path: '/ac', refresh: true } });
      ok(r);
      expect((r.data!.content ?? []).map((e) => e.name)).toEqual(['late.txt']);
    } finally {
      await remote.close();
    }
  });
});
