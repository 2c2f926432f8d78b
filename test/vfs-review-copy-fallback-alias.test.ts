/**
 * Review of the VFS copy/move paths (src/vfs/vfs-transfer.ts, set-aside.ts, the copy task and the
 * WebDAV COPY fallbacks), each test proving one defect found by reading the code:
 * - a copy inside a storage whose driver cannot copy (FTP): REST answered 500 `not implement`
 *   where AList makes a copy task (alist-compat §10), and WebDAV COPY of a file (or folder) answered 405
 *   although the file can be streamed (read + put) as between two storages, and a COPY of a file
 *   over a folder was refused by checkTransfer for the same missing driver copy. (Made so, a copy
 *   onto itself must be refused before the capabilities: else it became a task rewriting the file.)
 * - one place at both ends of a transfer between storages (a writable Alias showing another
 *   storage): WebDAV MOVE of a file onto its alias path answered 204 and deleted it (copied onto
 *   itself, then the source removed), COPY of a folder onto its alias path with Overwrite: T
 *   removed the folder first and answered 204 with it gone, and a REST copy of a folder into its own
 *   subfolder through the alias made copy tasks without end (each level copies the one it made).
 */
import { existsSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';
import { ok, seed } from './fs-helpers.js';
import { addLocalStorage, settle } from './tasks-helpers.js';
import { createStorage, startRemoteServers, type RemoteServers } from './remote-servers.js';

let s: TestServer;
let admin: string;
let dav: DavClient;
let remote: RemoteServers<'FTP'>;
let la: string;

beforeAll(async () => {
  remote = await startRemoteServers(['FTP']);
  s = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  admin = await s.login();
  dav = davClient(s.url, 'admin', ADMIN_PASSWORD);
  ok(await createStorage(s, admin, '/ftp', 'FTP', remote.additionOf('FTP')));
  la = await addLocalStorage(s, admin, '/la');
  // A writable alias showing /la again: /al/x is the same file as /la/x.
  ok(await createStorage(s, admin, '/al', 'Alias', { paths: '/la', writable: true }));
}, 60_000);

afterAll(async () => {
  await s?.close();
  await remote?.stop();
  if (la) await rm(la, { recursive: true, force: true });
});

async function text(path: string): Promise<string> {
  const res = await dav('GET', path);
  expect(res.status, path).toBe(200);
  return res.body;
}

describe('copy inside a storage whose driver has no copy (FTP)', () => {
  it('REST copy runs as a copy task (AList) instead of failing', async () => {
    await seed(s, admin, { '/ftp/r1/a/f.txt': 'rest copy body' });
    ok(await s.api('/api/fs/mkdir', { token: admin, body: { path: '/ftp/r1/b' } }));
    const r = await s.api<{ tasks: unknown[] }>('/api/fs/copy', { token: admin, body: { src_dir: '/ftp/r1/a', dst_dir: '/ftp/r1/b', names: ['f.txt'] } });
    expect(r, JSON.stringify(r)).toMatchObject({ code: 200 });
    expect(r.data?.tasks).toHaveLength(1);
    const done = await settle(s, admin, 'copy');
    expect(done.every((t) => t.state === 2), JSON.stringify(done)).toBe(true);
    expect(await text('/ftp/r1/b/f.txt')).toBe('rest copy body');
  });

  it('REST copy onto itself (overwrite) is refused, not made a task that rewrites the file', async () => {
    const body = 'x'.repeat(300_000);
    await seed(s, admin, { '/ftp/r2/f.txt': body });
    const r = await s.api('/api/fs/copy', { token: admin, body: { src_dir: '/ftp/r2', dst_dir: '/ftp/r2', names: ['f.txt'], overwrite: true } });
    expect(r).toMatchObject({ code: 403, message: 'file [f.txt] exists' });
    await settle(s, admin, 'copy');
    expect((await text('/ftp/r2/f.txt')).length).toBe(body.length);
  });

  it('WebDAV COPY of a file streams it', async () => {
    await seed(s, admin, { '/ftp/w1/f.txt': 'dav copy body' });
    const res = await dav('COPY', '/ftp/w1/f.txt', { headers: { Destination: `${s.url}/dav/ftp/w1/g.txt` } });
    expect(res.status, res.body).toBe(201);
    expect(await text('/ftp/w1/g.txt')).toBe('dav copy body');
    expect(await text('/ftp/w1/f.txt')).toBe('dav copy body');
  });

  it('WebDAV COPY of a folder copies its files', async () => {
    await seed(s, admin, { '/ftp/w2/d/f.txt': 'in a folder' });
    const res = await dav('COPY', '/ftp/w2/d', { headers: { Destination: `${s.url}/dav/ftp/w2/e` } });
    expect(res.status, res.body).toBe(201);
    expect(await text('/ftp/w2/e/f.txt')).toBe('in a folder');
  });
  it('WebDAV COPY of a file over a folder (Overwrite: T) replaces it', async () => {
    await seed(s, admin, { '/ftp/w3/f.txt': 'over a folder', '/ftp/w3/dir/old.txt': 'old' });
    const res = await dav('COPY', '/ftp/w3/f.txt', { headers: { Destination: `${s.url}/dav/ftp/w3/dir` } });
    expect(res.status, res.body).toBe(204);
    expect(await text('/ftp/w3/dir')).toBe('over a folder');
  });
});

describe('WebDAV onto the same file or folder seen through an alias', () => {
  it('MOVE of a file onto its own alias path keeps the file', async () => {
    await writeFile(join(la, 'm.txt'), 'moved onto itself');
    const res = await dav('MOVE', '/la/m.txt', { headers: { Destination: `${s.url}/dav/al/m.txt` } });
    expect(existsSync(join(la, 'm.txt')), `${res.status}`).toBe(true);
    expect(res.status).toBe(403);
  });

  it('COPY of a folder onto its own alias path (Overwrite: T) keeps the folder', async () => {
    await mkdir(join(la, 'cd'));
    await writeFile(join(la, 'cd', 'f.txt'), 'copied onto itself');
    const res = await dav('COPY', '/la/cd', { headers: { Destination: `${s.url}/dav/al/cd` } });
    expect(existsSync(join(la, 'cd', 'f.txt')), `${res.status}`).toBe(true);
    expect(res.status).toBe(403);
  });

  it('REST copy of a folder into its own subfolder through the alias is refused (no endless copy tasks)', async () => {
    await mkdir(join(la, 'rd'));
    await writeFile(join(la, 'rd', 'f.txt'), 'x');
    const r = await s.api('/api/fs/copy', { token: admin, body: { src_dir: '/la', dst_dir: '/al/rd', names: ['rd'] } });
    expect(r).toMatchObject({ message: 'the destination folder is a subfolder of the source folder' });
    expect(existsSync(join(la, 'rd', 'rd'))).toBe(false);
  });
});
