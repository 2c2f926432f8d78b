/**
 * Defects a review of the WebDAV adapter against what network-drive clients send found (each test
 * failed before its fix): once the dead properties filled their bound, Explorer's PROPPATCH of its
 * Win32 properties was 507 (every later Explorer copy failed), and COPY (Depth infinity or 0) and a
 * MOVE between storages answered 507 for a copy they had already made; a MOVE between storages by a
 * user without the remove bit made the copy, then answered 403 (the file was in both places).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';
import { makeUser, ok, PERM } from './fs-helpers.js';
import { MAX_RESOURCE_CHARS, MAX_TOTAL_CHARS } from '../protocols/webdav/dead-props.js';

let ts: TestServer;
let dav: DavClient;

beforeAll(async () => {
  ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
});
afterAll(async () => {
  await ts?.close();
});

const WHEN = 'Tue, 01 Jan 2019 10:00:00 GMT';
const win32Set =
  '<?xml version="1.0" encoding="utf-8" ?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:"><D:set><D:prop>' +
  `<Z:Win32CreationTime>${WHEN}</Z:Win32CreationTime><Z:Win32LastAccessTime>${WHEN}</Z:Win32LastAccessTime>` +
  `<Z:Win32LastModifiedTime>${WHEN}</Z:Win32LastModifiedTime><Z:Win32FileAttributes>00000020</Z:Win32FileAttributes>` +
  '</D:prop></D:set></D:propertyupdate>';

const bigProp = (n: number) =>
  `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:z="urn:x"><D:set><D:prop><z:big>${'v'.repeat(n)}</z:big></D:prop></D:set></D:propertyupdate>`;

/** Fill the server-wide dead-property bound in halving steps, to less than Explorer's few hundred bytes of room. */
async function fillDeadProps(): Promise<void> {
  expect((await dav('MKCOL', '/fill')).status).toBe(201);
  let size = MAX_RESOURCE_CHARS - 1000;
  for (let i = 0; size >= 64 && i < MAX_TOTAL_CHARS / 1000; i++) {
    expect((await dav('PUT', `/fill/${i}`, { body: '' })).status).toBe(201);
    const r = await dav('PROPPATCH', `/fill/${i}`, { body: bigProp(size) });
    if (r.status === 507) size = Math.floor(size / 2);
    else expect(r.status).toBe(207);
  }
  expect(size).toBeLessThan(64);
}

describe('once the dead properties fill their bound', () => {
  beforeAll(async () => {
    // A folder and a file with properties, to COPY and MOVE below, and a second storage; then other
    // clients' properties fill the bound (as some 17,000 files copied by Explorer would).
    expect((await dav('MKCOL', '/withprops')).status).toBe(201);
    expect((await dav('PUT', '/withprops/f.txt', { body: 'f' })).status).toBe(201);
    expect((await dav('PROPPATCH', '/withprops/f.txt', { body: bigProp(2000) })).status).toBe(207);
    expect((await dav('PROPPATCH', '/withprops', { body: bigProp(2000) })).status).toBe(207);
    ok(await ts.api('/api/admin/storage/create', { token: await ts.login(), body: { mount_path: '/other', driver: 'Memory' } }));
    await fillDeadProps();
  }, 120_000);

  it("Explorer's PROPPATCH of the Win32 properties still answers 200 (and sets the mtime), so its copy does not fail", async () => {
    // Explorer copies a file: PUT (empty), PROPPATCH of its Win32 properties (with LOCK, PUT, UNLOCK around).
    expect((await dav('PUT', '/copied.txt', { body: '' })).status).toBe(201);
    const pp = await dav('PROPPATCH', '/copied.txt', { body: win32Set });
    expect(pp.status).toBe(207);
    expect(pp.body).toContain('HTTP/1.1 200 OK');
    expect(pp.body).not.toMatch(/HTTP\/1.1 [45]\d\d/);
    const pf = await dav('PROPFIND', '/copied.txt', { headers: { Depth: '0' } });
    expect(/<D:getlastmodified>([^<]*)</.exec(pf.body)?.[1]).toBe(WHEN);
    // A client's own properties are still refused past the bound (nothing else changed).
    expect((await dav('PROPPATCH', '/copied.txt', { body: bigProp(1000) })).status).toBe(507);
  });

  it('a COPY whose properties do not fit is 507 and copies nothing (the copy was made, then answered 507)', async () => {
    const r = await dav('COPY', '/withprops', { headers: { Destination: '/dav/copy-of-withprops' } });
    expect(r.status).toBe(507);
    expect((await dav('PROPFIND', '/copy-of-withprops', { headers: { Depth: '0' } })).status).toBe(404);
    // Depth 0: the folder alone, with its own properties.
    expect((await dav('COPY', '/withprops', { headers: { Destination: '/dav/bare-copy', Depth: '0' } })).status).toBe(507);
    expect((await dav('PROPFIND', '/bare-copy', { headers: { Depth: '0' } })).status).toBe(404);
    const f = await dav('COPY', '/withprops/f.txt', { headers: { Destination: '/dav/copy-of-f.txt' } });
    expect(f.status).toBe(507);
    expect((await dav('GET', '/copy-of-f.txt')).status).toBe(404);
  });

  it('a MOVE to another storage whose properties do not fit is 507 and leaves one file, not two', async () => {
    const r = await dav('MOVE', '/withprops/f.txt', { headers: { Destination: '/dav/other/f.txt' } });
    expect(r.status).toBe(507);
    expect((await dav('GET', '/withprops/f.txt')).body).toBe('f');
    expect((await dav('GET', '/other/f.txt')).status).toBe(404);
  });
});

describe('MOVE between storages by a user who may move and copy, but not remove', () => {
  it('is refused before anything is copied (it made the copy, then answered 403: the file was in both places)', async () => {
    const admin = await ts.login();
    ok(await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path: '/across', driver: 'Memory' } }));
    await makeUser(ts, admin, 'mover', PERM.WRITE | PERM.RENAME | PERM.MOVE | PERM.COPY | PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE);
    const mover = davClient(ts.url, 'mover', 'pw-mover-123');
    expect((await mover('PUT', '/keep.txt', { body: 'k' })).status).toBe(201);
    expect((await mover('PUT', '/across/there.txt', { body: 'old' })).status).toBe(201);

    expect((await mover('MOVE', '/keep.txt', { headers: { Destination: '/dav/across/keep.txt' } })).status).toBe(403);
    expect((await mover('GET', '/keep.txt')).body).toBe('k');
    expect((await mover('GET', '/across/keep.txt')).status).toBe(404);
    // Over an existing name too: the file it would replace is still there.
    expect((await mover('MOVE', '/keep.txt', { headers: { Destination: '/dav/across/there.txt' } })).status).toBe(403);
    expect((await mover('GET', '/across/there.txt')).body).toBe('old');
    expect((await mover('GET', '/keep.txt')).body).toBe('k');
    // A move inside one storage needs no remove bit.
    expect((await mover('MOVE', '/keep.txt', { headers: { Destination: '/dav/kept.txt' } })).status).toBe(201);
  });
});

describe('COPY over an existing folder by a user who may copy and remove, but not write', () => {
  it('is refused before the destination is removed (it was removed, then the member-by-member copy refused)', async () => {
    expect((await dav('MKCOL', '/csrc')).status).toBe(201);
    expect((await dav('PUT', '/csrc/a.txt', { body: 'a' })).status).toBe(201);
    expect((await dav('MKCOL', '/cdst')).status).toBe(201);
    expect((await dav('PUT', '/cdst/keep.txt', { body: 'k' })).status).toBe(201);
    await makeUser(ts, await ts.login(), 'copier', PERM.COPY | PERM.REMOVE | PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE);
    const copier = davClient(ts.url, 'copier', 'pw-copier-123');
    for (const depth of ['infinity', '0']) {
      expect((await copier('COPY', '/csrc', { headers: { Destination: '/dav/cdst', Depth: depth } })).status).toBe(403);
      expect((await dav('GET', '/cdst/keep.txt')).body).toBe('k');
    }
  });
});
