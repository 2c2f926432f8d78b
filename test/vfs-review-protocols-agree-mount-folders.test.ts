/**
 * One operation, three protocols, one VFS: edge cases run through REST, WebDAV and SFTP against one
 * server must end the same way (the VFS's rule), or at least never do on one protocol what the rule
 * refuses on the others. Each test here showed a protocol that disagreed (all fixed in vfs-write.ts and
 * vfs-transfer.ts, as they now are):
 * - WebDAV Overwrite:T onto a folder with a storage mounted below it (directly or through an Alias)
 *   removed the folder's files, then the transfer was refused as REST and SFTP refuse it
 *   (checkTransfer now refuses such a target first).
 * - The virtual folder of mount points inside a storage that lacks it: REST remove answered success
 *   (nothing removed), WebDAV and SFTP `not found`, for a folder every listing shows (realObj,
 *   source: FORBIDDEN, as a virtual folder no storage covers).
 * - Creating in that folder: REST put and MKCOL worked, WebDAV PUT answered 409 and SFTP put/mkdir
 *   `the parent folder does not exist`; moves and copies into it `not found` (existingDir,
 *   transfer's target folder: made in the storage on first use).
 */
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';
import { ok, seed } from './fs-helpers.js';

let ts: TestServer;
let admin: string;
let dav: DavClient;
let ssh: ssh2.Client;
let sftp: ssh2.SFTPWrapper;

const disk = (p: string) => join(ts.dataDir, 'storage', p);
const post = <T = unknown>(path: string, body: unknown) => ts.api<T>(path, { token: admin, body });
const davUrl = (p: string) => `${ts.url}/dav${p}`;

type SftpErr = (Error & { code?: number }) | null | undefined;
/** An SFTP call's outcome: 'ok' or the status code. */
const sf = (call: (cb: (err: SftpErr) => void) => void) =>
  new Promise<string | number>((resolve) => call((err) => resolve(err ? (err.code ?? -1) : 'ok')));

beforeAll(async () => {
  ts = await startTestServer();
  admin = await ts.login();
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
  ssh = new ssh2.Client();
  await new Promise<void>((resolve, reject) => {
    ssh.once('ready', () => resolve());
    ssh.once('error', reject);
    ssh.connect({ host: '127.0.0.1', port: ts.sftpPort, username: 'admin', password: ADMIN_PASSWORD, readyTimeout: 20_000 });
  });
  sftp = await new Promise((resolve, reject) => ssh.sftp((e, s) => (e ? reject(e) : resolve(s))));
  // A storage mounted on a path below a real folder of the default Local storage at `/`.
  ok(await post('/api/admin/storage/create', { mount_path: '/held/inner', driver: 'Memory' }));
  // And one below a folder the Local storage does not have: `/ghost` is only their virtual folder.
  ok(await post('/api/admin/storage/create', { mount_path: '/ghost/inner', driver: 'Memory' }));
});

afterAll(async () => {
  ssh?.end();
  await ts?.close();
});

describe('a folder with a storage mounted below it is never replaced', () => {
  it('WebDAV MOVE/COPY Overwrite:T of a file onto it refuses before removing the folder, as REST and SFTP refuse', async () => {
    await seed(ts, admin, { '/held/keep.txt': 'keep', '/f.txt': 'moving' });
    // REST: a taken name, whatever overwrite says.
    expect((await post('/api/fs/rename', { path: '/f.txt', name: 'held', overwrite: true })).code).not.toBe(200);
    // SFTP: posix-rename and RENAME both refuse.
    expect(await sf((cb) => sftp.ext_openssh_rename('/f.txt', '/held', cb))).not.toBe('ok');
    expect(await sf((cb) => sftp.rename('/f.txt', '/held', cb))).not.toBe('ok');
    // WebDAV: refused too, and what the folder held is still there.
    for (const method of ['MOVE', 'COPY']) {
      const r = await dav(method, '/f.txt', { headers: { destination: davUrl('/held'), overwrite: 'T' } });
      expect(r.status, method).toBeGreaterThanOrEqual(400);
      expect(await readFile(disk('held/keep.txt'), 'utf8'), method).toBe('keep');
    }
    expect(await readFile(disk('f.txt'), 'utf8')).toBe('moving');
    expect(existsSync(disk('held'))).toBe(true);
  });

  it('nor through an Alias showing it: WebDAV Overwrite:T onto the alias path keeps what the folder holds', async () => {
    await seed(ts, admin, { '/zone/dir/keep.txt': 'keep', '/g.txt': 'moving' });
    ok(await post('/api/admin/storage/create', { mount_path: '/zone/dir/inner', driver: 'Memory' }));
    ok(await post('/api/admin/storage/create', { mount_path: '/al', driver: 'Alias', addition: JSON.stringify({ paths: '/zone', writable: true }) }));
    for (const method of ['MOVE', 'COPY']) {
      const r = await dav(method, '/g.txt', { headers: { destination: davUrl('/al/dir'), overwrite: 'T' } });
      expect(r.status, method).toBeGreaterThanOrEqual(400);
      expect(await readFile(disk('zone/dir/keep.txt'), 'utf8'), method).toBe('keep');
    }
    expect(await readFile(disk('g.txt'), 'utf8')).toBe('moving');
  });
});

describe('the virtual folder of mount points inside a storage lacking it', () => {
  it('is refused to remove, rename and move (403) on every protocol, as stat shows it there', async () => {
    // Every protocol sees a folder.
    expect((await post<{ is_dir: boolean }>('/api/fs/get', { path: '/ghost' })).data?.is_dir).toBe(true);
    expect((await dav('PROPFIND', '/ghost', { headers: { depth: '0' } })).status).toBe(207);
    expect(await sf((cb) => sftp.stat('/ghost', cb))).toBe('ok');
    // Remove: REST answered success (nothing removed), WebDAV 404, SFTP NO_SUCH_FILE.
    expect((await post('/api/fs/remove', { dir: '/', names: ['ghost'] })).code).toBe(403);
    expect((await dav('DELETE', '/ghost')).status).toBe(403);
    expect(await sf((cb) => sftp.rmdir('/ghost', cb))).toBe(ssh2.utils.sftp.STATUS_CODE.PERMISSION_DENIED);
    // Rename and move: `object not found` for what every listing shows.
    expect((await post('/api/fs/rename', { path: '/ghost', name: 'g2' })).code).toBe(403);
    expect((await post('/api/fs/move', { src_dir: '/', dst_dir: '/held', names: ['ghost'] })).code).toBe(403);
    expect((await dav('MOVE', '/ghost', { headers: { destination: davUrl('/g2') } })).status).toBe(403);
    expect(await sf((cb) => sftp.rename('/ghost', '/g2', cb))).toBe(ssh2.utils.sftp.STATUS_CODE.PERMISSION_DENIED);
    // Into another storage: WebDAV answered 201 for an empty copy there, the folder staying where it was.
    expect((await dav('MOVE', '/ghost', { headers: { destination: davUrl('/held/inner/g3') } })).status).toBe(403);
    expect((await dav('PROPFIND', '/held/inner/g3', { headers: { depth: '0' } })).status).toBe(404);
    expect((await post<{ content: Array<{ name: string }> }>('/api/fs/list', { path: '/' })).data!.content.map((e) => e.name)).toContain('ghost');
  });
});

describe('creating inside the virtual folder of mount points', () => {
  it('works on every protocol, as REST put and WebDAV MKCOL did (WebDAV PUT answered 409, SFTP "parent folder does not exist")', async () => {
    for (const g of ['v1', 'v2', 'v3']) ok(await post('/api/admin/storage/create', { mount_path: `/${g}/inner`, driver: 'Memory' }));
    expect((await dav('PUT', '/v1/f.txt', { body: 'dav' })).status).toBe(201);
    expect(await sf((cb) => sftp.writeFile('/v2/f.txt', 'sftp', cb))).toBe('ok');
    expect(await sf((cb) => sftp.mkdir('/v3/sub', cb))).toBe('ok');
    expect(await readFile(disk('v1/f.txt'), 'utf8')).toBe('dav');
    expect(await readFile(disk('v2/f.txt'), 'utf8')).toBe('sftp');
    expect(existsSync(disk('v3/sub'))).toBe(true);
    // A folder no mount point lies below is still missing for them.
    expect((await dav('PUT', '/nowhere/f.txt', { body: 'x' })).status).toBe(409);
    expect(await sf((cb) => sftp.writeFile('/nowhere/f.txt', 'x', cb))).toBe(ssh2.utils.sftp.STATUS_CODE.NO_SUCH_FILE);
    expect(existsSync(disk('nowhere'))).toBe(false);
  });

  it('a move or copy into it works on every protocol too (it was `not found` where an upload worked)', async () => {
    for (const g of ['w1', 'w2', 'w3', 'w4']) ok(await post('/api/admin/storage/create', { mount_path: `/${g}/inner`, driver: 'Memory' }));
    await seed(ts, admin, { '/mv/a.txt': 'a', '/mv/b.txt': 'b', '/mv/c.txt': 'c', '/mv/d.txt': 'd' });
    ok(await post('/api/fs/move', { src_dir: '/mv', dst_dir: '/w1', names: ['a.txt'] }));
    expect((await dav('MOVE', '/mv/b.txt', { headers: { destination: davUrl('/w2/b.txt') } })).status).toBe(201);
    expect(await sf((cb) => sftp.rename('/mv/c.txt', '/w3/c.txt', cb))).toBe('ok');
    ok(await post('/api/fs/copy', { src_dir: '/mv', dst_dir: '/w4', names: ['d.txt'] }));
    for (const [p, body] of [['w1/a.txt', 'a'], ['w2/b.txt', 'b'], ['w3/c.txt', 'c'], ['w4/d.txt', 'd']]) expect(await readFile(disk(p!), 'utf8'), p).toBe(body);
  });
});
