/**
 * The search index follows writes made over WebDAV and SFTP and outside changes to a Local storage
 * (a folder renamed or moved to another storage's folder on disk, then deleted), not only REST.
 */
import { mkdir as mkdirHost, rename as renameHost, rm as rmHost, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { ok } from './fs-helpers.js';
import { davClient } from './clients/webdav.js';
import { withSsh2Sftp } from './clients/sftp.js';
import { addLocalStorage, until } from './tasks-helpers.js';

let ts: TestServer;
let admin: string;
let bRoot: string;

/** `parent|name` of every hit, in the server's order. */
async function hits(keywords: string): Promise<string[]> {
  const r = await ts.api<{ content: Array<{ parent: string; name: string }> }>('/api/fs/search', { token: admin, body: { parent: '/', keywords, page: 1, per_page: 100 } });
  ok(r);
  return r.data!.content.map((h) => `${h.parent}|${h.name}`);
}

/** Poll until the hits for `keywords` equal `want` (outside changes arrive after a debounce). */
async function expectHits(keywords: string, want: string[]): Promise<void> {
  const got = await until(`hits for ${keywords}`, async () => {
    const h = await hits(keywords);
    return JSON.stringify(h) === JSON.stringify(want) ? h : undefined;
  }, 15_000, 100).catch(async () => hits(keywords));
  expect(got).toEqual(want);
}

beforeAll(async () => {
  ts = await startTestServer();
  admin = await ts.login();
  bRoot = await addLocalStorage(ts, admin, '/b');
  ok(await ts.api('/api/fs/mkdir', { token: admin, body: { path: '/w' } }));
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'search_index', value: 'database' }] }));
  ok(await ts.api('/api/admin/index/build', { token: admin, body: {} }));
  await until('the build', async () => ((await ts.api<{ is_done: boolean }>('/api/admin/index/progress', { token: admin })).data?.is_done ? true : undefined));
});
afterAll(async () => ts?.close());

it('WebDAV PUT, MKCOL, MOVE and DELETE', async () => {
  const dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
  expect((await dav('PUT', '/w/davfile.txt', { body: 'd' })).status).toBe(201);
  expect((await dav('MKCOL', '/w/davdir')).status).toBe(201);
  expect(await hits('dav')).toEqual(['/w|davdir', '/w|davfile.txt']);
  expect((await dav('MOVE', '/w/davfile.txt', { headers: { destination: `${ts.url}/dav/w/davdir/davmoved.txt` } })).status).toBe(201);
  expect(await hits('dav')).toEqual(['/w|davdir', '/w/davdir|davmoved.txt']);
  expect((await dav('DELETE', '/w/davdir')).status).toBe(204);
  expect(await hits('dav')).toEqual([]);
});

it('SFTP mkdir, write, rename of a folder and removal', async () => {
  await withSsh2Sftp({ port: ts.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, async (sftp) => {
    const call = (fn: (cb: (e: Error | null | undefined) => void) => void) => new Promise<void>((res, rej) => fn((e) => (e ? rej(e) : res())));
    await call((cb) => sftp.mkdir('/w/sftpdir', cb));
    await call((cb) => sftp.writeFile('/w/sftpdir/sftpfile.txt', 'hello', cb));
    expect(await hits('sftp')).toEqual(['/w|sftpdir', '/w/sftpdir|sftpfile.txt']);
    await call((cb) => sftp.rename('/w/sftpdir', '/w/sftprenamed', cb));
    expect(await hits('sftp')).toEqual(['/w/sftprenamed|sftpfile.txt', '/w|sftprenamed']);
    await call((cb) => sftp.unlink('/w/sftprenamed/sftpfile.txt', cb));
    await call((cb) => sftp.rmdir('/w/sftprenamed', cb));
    expect(await hits('sftp')).toEqual([]);
  });
});

it('outside changes: a folder made, renamed, moved into another storage and removed on disk', async () => {
  const host = join(ts.dataDir, 'storage');
  await mkdirHost(join(host, 'out', 'deep'), { recursive: true });
  await writeFile(join(host, 'out', 'deep', 'outside-file.txt'), 'o');
  await expectHits('outside', ['/out/deep|outside-file.txt']);
  await renameHost(join(host, 'out'), join(host, 'out2'));
  await expectHits('outside', ['/out2/deep|outside-file.txt']);
  await renameHost(join(host, 'out2', 'deep'), join(bRoot, 'deep-moved'));
  await expectHits('outside', ['/b/deep-moved|outside-file.txt']);
  await expectHits('deep', ['/b|deep-moved']);
  await rmHost(join(bRoot, 'deep-moved'), { recursive: true });
  await expectHits('outside', []);
  await expectHits('deep', []);
});
