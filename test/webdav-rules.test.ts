/**
 * Meta rules and permission bits seen through WebDAV. The adapter decides nothing itself: the VFS
 * answers, and the status comes from the adapter's error table. Users and rules are made through
 * the REST admin API, files through WebDAV as admin.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';
import { addMeta, makeUser, PERM } from './fs-helpers.js';

let ts: TestServer;
let admin: DavClient;
const pw = (u: string) => `pw-${u}-123`;
const as = (u: string) => davClient(ts.url, u, pw(u));
const DAV_RW = PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE;

beforeAll(async () => {
  ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  admin = davClient(ts.url, 'admin', ADMIN_PASSWORD);
  for (const d of ['/pub', '/open', '/ro', '/vault', '/home', '/home/carol']) expect((await admin('MKCOL', d)).status).toBe(201);
  for (const f of ['/pub/visible.txt', '/pub/secret.txt', '/open/a.txt', '/ro/a.txt', '/vault/in.txt', '/home/carol/c.txt', '/top.txt']) {
    expect((await admin('PUT', f, { body: `content of ${f}` })).status).toBe(201);
  }
  const token = await ts.login();
  await addMeta(ts, token, { path: '/pub', hide: 'secret', h_sub: true });
  await addMeta(ts, token, { path: '/open', write: true, w_sub: true });
  await addMeta(ts, token, { path: '/vault', password: 'vault-pw', p_sub: true });
  // bob: WebDAV read+manage and every operation bit except write (meta may grant it).
  await makeUser(ts, token, 'bob', DAV_RW | PERM.RENAME | PERM.MOVE | PERM.COPY | PERM.REMOVE);
  await makeUser(ts, token, 'reader', PERM.WEBDAV_READ);
  await makeUser(ts, token, 'nodav', PERM.WRITE);
  await makeUser(ts, token, 'writer', DAV_RW | PERM.WRITE); // no rename/move/copy/remove bits
  await makeUser(ts, token, 'seer', DAV_RW | PERM.SEE_HIDDEN | PERM.NO_PASSWORD);
  await makeUser(ts, token, 'carol', DAV_RW | PERM.WRITE, '/home/carol');
});
afterAll(async () => {
  await ts?.close();
});

describe('meta rules through WebDAV', () => {
  it('hides entries from PROPFIND and answers 404 on direct access', async () => {
    const bob = as('bob');
    const list = await bob('PROPFIND', '/pub/', { headers: { Depth: '1' } });
    expect(list.status).toBe(207);
    expect(list.body).toContain('/dav/pub/visible.txt');
    expect(list.body).not.toContain('secret');
    expect((await bob('GET', '/pub/secret.txt')).status).toBe(404);
    expect((await bob('PROPFIND', '/pub/secret.txt', { headers: { Depth: '0' } })).status).toBe(404);
    expect((await bob('DELETE', '/pub/secret.txt')).status).toBe(404);
    // The see-hidden bit shows them.
    const seer = await as('seer')('PROPFIND', '/pub/', { headers: { Depth: '1' } });
    expect(seer.body).toContain('/dav/pub/secret.txt');
  });

  it('write comes from the write bit or a meta write grant (403 otherwise)', async () => {
    const bob = as('bob');
    expect((await bob('PUT', '/open/new.txt', { body: 'x' })).status).toBe(201);
    expect((await bob('MKCOL', '/open/sub')).status).toBe(201);
    expect((await bob('PUT', '/ro/new.txt', { body: 'x' })).status).toBe(403);
    expect((await bob('MKCOL', '/ro/sub')).status).toBe(403);
    expect((await bob('PUT', '/ro/a.txt', { body: 'x' })).status).toBe(403);
    expect((await bob('PROPPATCH', '/ro/a.txt', { body: proppatch })).status).toBe(403);
    expect((await bob('LOCK', '/ro/a.txt', { body: lockinfo })).status).toBe(403);
    expect((await admin('GET', '/ro/a.txt')).body).toBe('content of /ro/a.txt');
  });

  it('refuses a password-protected folder (403) unless the user may skip passwords', async () => {
    const bob = as('bob');
    expect((await bob('PROPFIND', '/vault/', { headers: { Depth: '1' } })).status).toBe(403);
    expect((await bob('GET', '/vault/in.txt')).status).toBe(403);
    expect((await as('seer')('GET', '/vault/in.txt')).body).toBe('content of /vault/in.txt');
  });
});

const proppatch = `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><x:a xmlns:x="urn:x">1</x:a></D:prop></D:set></D:propertyupdate>`;
const lockinfo = `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`;

describe('permission matrix', () => {
  it('needs the WebDAV read bit to log in at all, and refuses disabled users', async () => {
    expect((await as('nodav')('PROPFIND', '/', { headers: { Depth: '0' } })).status).toBe(403);
    const token = await ts.login();
    const list = await ts.api<{ content: Array<{ id: number; username: string }> }>('/api/admin/user/list', { token });
    const id = list.data!.content.find((u) => u.username === 'reader')!.id;
    const upd = await ts.api('/api/admin/user/update', { token, body: { id, username: 'reader', disabled: true, permission: PERM.WEBDAV_READ, base_path: '/' } });
    expect(upd.code).toBe(200);
    expect((await as('reader')('PROPFIND', '/', { headers: { Depth: '0' } })).status).toBe(403);
    await ts.api('/api/admin/user/update', { token, body: { id, username: 'reader', disabled: false, permission: PERM.WEBDAV_READ, base_path: '/' } });
  });

  it('read-only WebDAV users may read but not write (403, never 401)', async () => {
    const reader = as('reader');
    expect((await reader('GET', '/top.txt')).status).toBe(200);
    expect((await reader('PROPFIND', '/', { headers: { Depth: '1' } })).status).toBe(207);
    for (const [m, p, h, body] of [
      ['PUT', '/r.txt', {}, 'x'],
      ['MKCOL', '/rdir', {}, undefined],
      ['DELETE', '/top.txt', {}, undefined],
      ['COPY', '/top.txt', { Destination: '/dav/top2.txt' }, undefined],
      ['MOVE', '/top.txt', { Destination: '/dav/top2.txt' }, undefined],
      ['PROPPATCH', '/top.txt', {}, proppatch],
      ['LOCK', '/top.txt', {}, lockinfo],
    ] as const) {
      expect([m, (await reader(m, p, { headers: h, body })).status]).toEqual([m, 403]);
    }
  });

  it('each operation keeps its own bit', async () => {
    const writer = as('writer');
    expect((await writer('PUT', '/w.txt', { body: 'w' })).status).toBe(201);
    expect((await writer('DELETE', '/w.txt')).status).toBe(403);
    expect((await writer('COPY', '/w.txt', { headers: { Destination: '/dav/w2.txt' } })).status).toBe(403);
    expect((await writer('MOVE', '/w.txt', { headers: { Destination: '/dav/open/w.txt' } })).status).toBe(403);
    expect((await writer('MOVE', '/w.txt', { headers: { Destination: '/dav/w3.txt' } })).status).toBe(403);
    const bob = as('bob');
    expect((await bob('COPY', '/top.txt', { headers: { Destination: '/dav/open/top.txt' } })).status).toBe(201);
    expect((await bob('MOVE', '/open/top.txt', { headers: { Destination: '/dav/open/sub/top.txt' } })).status).toBe(201);
    expect((await bob('DELETE', '/open/sub/top.txt')).status).toBe(204);
  });

  it('confines a user to their base path', async () => {
    const carol = as('carol');
    const root = await carol('PROPFIND', '/', { headers: { Depth: '1' } });
    expect(root.status).toBe(207);
    expect(root.body).toContain('<D:href>/dav/c.txt</D:href>');
    expect(root.body).not.toContain('top.txt');
    expect((await carol('GET', '/c.txt')).body).toBe('content of /home/carol/c.txt');
    expect((await carol('GET', '/%2e%2e/%2e%2e/top.txt')).status).toBe(400);
    expect((await carol('COPY', '/c.txt', { headers: { Destination: '/dav/../../top.txt' } })).status).toBe(400);
    // An absolute URL is resolved first; one that leaves /dav is not this WebDAV space.
    expect((await carol('COPY', '/c.txt', { headers: { Destination: `${ts.url}/dav/../../top.txt` } })).status).toBe(502);
    expect((await admin('GET', '/top.txt')).body).toBe('content of /top.txt');
  });
});
