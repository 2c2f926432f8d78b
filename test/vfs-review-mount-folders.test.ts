/**
 * Review of the VFS core (mount table, meta rules, transfers, listing cache), each defect proven
 * against the real server over REST and at least one other protocol (WebDAV, SFTP).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { addMeta, list, makeUser, ok, PERM, putFile } from './fs-helpers.js';
import { connectSftpSurface, statusCode, withSsh2Sftp } from './clients/sftp.js';

let ts: TestServer;
let admin: string;
const dav = (method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
  fetch(`${ts.url}/dav${path}`, {
    method, body, headers: { authorization: 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64'), ...headers },
  });
const storage = async (mount_path: string, driver: string, addition: Record<string, unknown> = {}) =>
  ok(await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path, driver, addition: JSON.stringify(addition) } }));

beforeAll(async () => {
  ts = await startTestServer();
  admin = await ts.login();
}, 30_000);
afterAll(async () => {
  await ts?.close();
});

describe('virtual folders made of mount points below a storage', () => {
  // The first start mounts a Local storage at `/`; a storage mounted deeper, at a path whose
  // folders the Local storage lacks, shows its first segment in `/`: that folder must open.
  beforeAll(async () => {
    await storage('/deep/er', 'Memory');
  });

  it('REST: the folder listed in / can be listed and got', async () => {
    const root = await list(ts, admin, '/');
    ok(root);
    expect(root.data!.content.map((e) => e.name)).toContain('deep');
    const deep = await list(ts, admin, '/deep');
    ok(deep);
    expect(deep.data!.content.map((e) => [e.name, e.is_dir])).toEqual([['er', true]]);
    const got = await ts.api<{ name: string; is_dir: boolean }>('/api/fs/get', { token: admin, body: { path: '/deep' } });
    ok(got);
    expect(got.data).toMatchObject({ name: 'deep', is_dir: true });
    ok(await list(ts, admin, '/deep/er'));
  });

  it('WebDAV: PROPFIND of the folder is a 207 listing its mount point', async () => {
    const pf = await dav('PROPFIND', '/deep/', { depth: '1' });
    expect(pf.status).toBe(207);
    expect(await pf.text()).toContain('/dav/deep/er');
  });

  it('SFTP: the folder can be opened and lists its mount point', async () => {
    const sftp = await connectSftpSurface(ts.sftpPort, 'admin', ADMIN_PASSWORD);
    try {
      expect(await sftp.list('/deep')).toEqual({ outcome: 'ok', names: ['er'] });
    } finally {
      await sftp.close();
    }
    // `df` in the folder (statvfs@openssh.com) answers too, as it does for `/`.
    const statvfs = (path: string) => withSsh2Sftp({ port: ts.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, (sftp) =>
      statusCode((cb) => sftp.ext_openssh_statvfs(path, cb)),
    );
    expect(await statvfs('/deep')).toBeUndefined();
  });
});

describe('a file cannot take the place of a folder of mount points', () => {
  // `/v` has no folder on the Local storage at `/`; its only content is the storage at `/v/x`.
  beforeAll(async () => {
    await storage('/v/x', 'Memory');
    ok(await putFile(ts, admin, '/plain.txt', 'plain'));
    ok(await putFile(ts, admin, '/sub/v', 'a file named v'));
  });
  const rootShowsFolder = async () => {
    const root = await list(ts, admin, '/');
    ok(root);
    expect(root.data!.content.filter((e) => e.name === 'v').map((e) => e.is_dir)).toEqual([true]);
    expect((await list(ts, admin, '/v')).data?.content.map((e) => e.name)).toEqual(['x']);
  };

  it('REST: an upload there is refused, and so is a move or copy onto it with overwrite', async () => {
    expect((await putFile(ts, admin, '/v', 'a file')).code).not.toBe(200);
    for (const route of ['move', 'copy']) {
      const r = await ts.api(`/api/fs/${route}`, { token: admin, body: { src_dir: '/sub', dst_dir: '/', names: ['v'], overwrite: true } });
      expect(r).toMatchObject({ code: 403, message: 'file [v] exists' });
    }
    const ren = await ts.api('/api/fs/rename', { token: admin, body: { path: '/plain.txt', name: 'v', overwrite: true } });
    expect(ren).toMatchObject({ code: 403, message: 'file [v] exists' });
    await rootShowsFolder();
    ok(await list(ts, admin, '/v/x'));
  });

  it('WebDAV: PUT there is refused', async () => {
    const r = await dav('PUT', '/v', {}, 'a file');
    expect(r.status).toBeGreaterThanOrEqual(400);
    await rootShowsFolder();
  });

  it('SFTP: writing a file there is refused', async () => {
    const code = await withSsh2Sftp({ port: ts.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, (sftp) =>
      statusCode((cb) => sftp.writeFile('/v', 'a file', cb)),
    );
    expect(code).toBeDefined();
    await rootShowsFolder();
  });
});

describe('hide lines RE2 takes', () => {
  // `(?i:…)` scopes a flag to a group: RE2 (which matches hide lines) and AList's regexp2 take it.
  it('REST: a rule hiding `(?i:^secret)` saves, and hides the name in any case (REST and WebDAV)', async () => {
    ok(await putFile(ts, admin, '/hid/SECRET.txt', 'hidden'));
    ok(await putFile(ts, admin, '/hid/open.txt', 'open'));
    await addMeta(ts, admin, { path: '/hid', hide: '(?i:^secret)' });
    const user = await makeUser(ts, admin, 'hider', PERM.WEBDAV_READ);
    const l = await list(ts, user, '/hid');
    ok(l);
    expect(l.data!.content.map((e) => e.name)).toEqual(['open.txt']);
    const pf = await fetch(`${ts.url}/dav/hid/`, {
      method: 'PROPFIND', headers: { depth: '1', authorization: 'Basic ' + Buffer.from('hider:pw-hider-123').toString('base64') },
    });
    expect(pf.status).toBe(207);
    const xml = await pf.text();
    expect(xml).toContain('open.txt');
    expect(xml).not.toContain('SECRET.txt');
  });
});
