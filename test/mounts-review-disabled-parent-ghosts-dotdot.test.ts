/**
 * Code review of the mount table and the virtual tree (src/vfs/mounts.ts, storages.ts, vfs.ts):
 * each defect proven against the real server over REST and WebDAV / SFTP.
 */
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { list, ok, putFile } from './fs-helpers.js';
import { connectSftpSurface } from './clients/sftp.js';
import { addLocalStorage, until } from './tasks-helpers.js';
import { openDavPut } from './clients/webdav.js';

let ts: TestServer;
let admin: string;
const dav = (method: string, path: string, headers: Record<string, string> = {}) =>
  fetch(`${ts.url}/dav${path}`, {
    method, headers: { authorization: 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64'), ...headers },
  });
const storage = async (mount_path: string, driver: string, addition: Record<string, unknown> = {}) => {
  const r = await ts.api<{ id: number }>('/api/admin/storage/create', { token: admin, body: { mount_path, driver, addition: JSON.stringify(addition) } });
  ok(r);
  return r.data!.id;
};
const sftpList = async (path: string) => {
  const sftp = await connectSftpSurface(ts.sftpPort, 'admin', ADMIN_PASSWORD);
  try {
    return await sftp.list(path);
  } finally {
    await sftp.close();
  }
};

beforeAll(async () => {
  ts = await startTestServer();
  admin = await ts.login();
}, 30_000);
afterAll(async () => {
  await ts?.close();
});

describe('a storage out of service above working mount points', () => {
  // AList lists the mount points below a path whose own storage fails (fs/list.go: the storage's
  // error is returned only when there are no virtual files).
  let id = 0;
  beforeAll(async () => {
    await storage('/out/in', 'Memory');
    id = await storage('/out', 'Memory');
  });

  it('disabled: its folder still lists the mount points below it (REST, WebDAV, SFTP)', async () => {
    ok(await ts.api(`/api/admin/storage/disable?id=${id}`, { token: admin, method: 'POST' }));
    try {
      const l = await list(ts, admin, '/out');
      ok(l);
      expect(l.data!.content.map((e) => e.name)).toEqual(['in']);
      const pf = await dav('PROPFIND', '/out/', { depth: '1' });
      expect(pf.status).toBe(207);
      expect(await pf.text()).toContain('/dav/out/in');
      expect(await sftpList('/out')).toEqual({ outcome: 'ok', names: ['in'] });
    } finally {
      ok(await ts.api(`/api/admin/storage/enable?id=${id}`, { token: admin, method: 'POST' }));
    }
  });

  it('init failed: its folder still lists the mount points below it, and stat answers a folder', async () => {
    await storage('/broken/in', 'Memory');
    const r = await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path: '/broken', driver: 'Local', addition: JSON.stringify({ root_folder_path: '/nonexistent/treegate-review' }) } });
    expect(r.code).toBe(500); // kept with its init error
    const l = await list(ts, admin, '/broken');
    ok(l);
    expect(l.data!.content.map((e) => e.name)).toEqual(['in']);
    const got = await ts.api<{ name: string; is_dir: boolean }>('/api/fs/get', { token: admin, body: { path: '/broken' } });
    ok(got);
    expect(got.data).toMatchObject({ name: 'broken', is_dir: true });
    const pf = await dav('PROPFIND', '/broken/', { depth: '1' });
    expect(pf.status).toBe(207);
    expect(await pf.text()).toContain('/dav/broken/in');
    expect(await sftpList('/broken')).toEqual({ outcome: 'ok', names: ['in'] });
    // Its own files stay out of reach: nothing falls through to the storage above.
    expect((await ts.api('/api/fs/get', { token: admin, body: { path: '/broken/x.txt' } })).code).toBe(500);
  });
});

describe('an upload that outlives a move of its storage\'s mount path', () => {
  it('does not put a ghost of the file at the old path into the search index', async () => {
    ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'search_index', value: 'database' }] }));
    ok(await ts.api('/api/admin/index/build', { token: admin, body: {} }));
    await until('the index build', async () => ((await ts.api<{ is_done: boolean }>('/api/admin/index/progress', { token: admin })).data?.is_done ? true : undefined));
    const root = await addLocalStorage(ts, admin, '/mvs');
    const all = await ts.api<{ content: Array<Record<string, unknown>> }>('/api/admin/storage/list', { token: admin });
    const s = all.data!.content.find((r) => r.mount_path === '/mvs')!;
    const data = randomBytes(4 << 20);
    const { req, status } = openDavPut(ts.url, '/dav/mvs/ghostly.bin', data.length, 'admin', ADMIN_PASSWORD);
    req.write(data.subarray(0, 1 << 20));
    // The Local driver's temp file appears in the storage's folder: the upload is under way.
    await until('the upload to start', async () => ((await readdir(root)).length > 0 ? true : undefined), 30_000, 10);
    ok(await ts.api('/api/admin/storage/update', { token: admin, body: { ...s, mount_path: '/mvd' } }));
    req.end(data.subarray(1 << 20));
    expect(await status).toBe(201);
    const r = await ts.api<{ content: Array<{ parent: string; name: string }> }>('/api/fs/search', {
      token: admin, body: { parent: '/', keywords: 'ghostly', scope: 0, page: 1, per_page: 100, password: '' },
    });
    ok(r);
    // Whatever the index holds must exist: nothing is served at /mvs any more.
    for (const h of r.data!.content) ok(await ts.api('/api/fs/get', { token: admin, body: { path: `${h.parent}/${h.name}` } }));
    expect(r.data!.content.map((h) => h.parent)).not.toContain('/mvs');
  });
});

describe('the folder of a disabled storage listed meanwhile (auto_update_index)', () => {
  it('keeps the storage\'s rows in the search index: they are unknown, not gone', async () => {
    // After the ghost test above: search_index is `database` and an index was built.
    ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'auto_update_index', value: 'true' }] }));
    await storage('/keep/inner', 'Memory');
    const id = await storage('/keep', 'Memory');
    ok(await putFile(ts, admin, '/keep/kept-rows.txt', 'k'));
    const hits = async () => (await ts.api<{ content: Array<{ parent: string; name: string }> }>('/api/fs/search', {
      token: admin, body: { parent: '/', keywords: 'kept-rows', scope: 0, page: 1, per_page: 100, password: '' },
    })).data!.content.map((h) => `${h.parent}/${h.name}`);
    expect(await hits()).toEqual(['/keep/kept-rows.txt']);
    ok(await ts.api(`/api/admin/storage/disable?id=${id}`, { token: admin, method: 'POST' }));
    ok(await list(ts, admin, '/keep'));
    ok(await ts.api(`/api/admin/storage/enable?id=${id}`, { token: admin, method: 'POST' }));
    expect(await hits()).toEqual(['/keep/kept-rows.txt']);
    ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'auto_update_index', value: 'false' }] }));
  });
});

describe('mount path cleaning (alist-compat §7: leading /, no trailing slash, `..` resolved)', () => {
  it('backslashes are slashes, as AList\'s FixAndCleanPath makes them (was refused)', async () => {
    const id = await storage('\\win\\share\\', 'Memory');
    const got = await ts.api<{ mount_path: string }>(`/api/admin/storage/get?id=${id}`, { token: admin });
    expect(got.data?.mount_path).toBe('/win/share');
    ok(await list(ts, admin, '/win/share'));
  });

  it('create and update resolve `..` in the mount path instead of refusing it', async () => {
    const id = await storage('/dots/../undotted/', 'Memory');
    const got = await ts.api<{ mount_path: string }>(`/api/admin/storage/get?id=${id}`, { token: admin });
    ok(got);
    expect(got.data!.mount_path).toBe('/undotted');
    ok(await list(ts, admin, '/undotted'));
    ok(await ts.api('/api/admin/storage/update', { token: admin, body: { ...got.data, mount_path: 'a/b/../../redotted' } }));
    expect((await ts.api<{ mount_path: string }>(`/api/admin/storage/get?id=${id}`, { token: admin })).data!.mount_path).toBe('/redotted');
  });
});
