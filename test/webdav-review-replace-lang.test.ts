/**
 * WebDAV defects a code review of the adapter found (each test failed before its fix): a COPY or
 * MOVE refused (a missing permission bit, hidden entries a folder would expose) after it had already
 * removed the destination it was to replace, and dead properties that lost their xml:lang (RFC 4918 §4.3).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';
import { addMeta, ALL_FS, makeUser, PERM } from './fs-helpers.js';

let ts: TestServer;
let dav: DavClient;
const propfindBody = (inner: string) => `<?xml version="1.0"?><D:propfind xmlns:D="DAV:">${inner}</D:propfind>`;

beforeAll(async () => {
  ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
});
afterAll(async () => {
  await ts?.close();
});

describe('COPY and MOVE over an existing folder', () => {
  it('refused for a missing copy, move or rename bit, leave the destination as it was', async () => {
    for (const d of ['/rv-src', '/rv-dst', '/rv-sub']) expect((await dav('MKCOL', d)).status).toBe(201);
    expect((await dav('PUT', '/rv-src/a.txt', { body: 'a' })).status).toBe(201);
    expect((await dav('PUT', '/rv-dst/keep.txt', { body: 'keep' })).status).toBe(201);
    expect((await dav('PUT', '/rv-file.txt', { body: 'f' })).status).toBe(201);
    // May write and remove, but neither copy, move nor rename.
    await makeUser(ts, await ts.login(), 'rv-nocopy', PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE | PERM.WRITE | PERM.REMOVE);
    const user = davClient(ts.url, 'rv-nocopy', 'pw-rv-nocopy-123');
    const to = (p: string) => ({ headers: { Destination: `${ts.url}/dav${p}`, Overwrite: 'T' } });
    for (const [method, src, dst] of [
      ['COPY', '/rv-src/', '/rv-dst/'], // copy bit
      ['MOVE', '/rv-file.txt', '/rv-dst'], // same folder: rename bit
      ['MOVE', '/rv-sub/', '/rv-src/rv-dst'], // elsewhere under a new name: move bit
    ] as const) {
      if (method === 'MOVE' && dst === '/rv-src/rv-dst') expect((await dav('MKCOL', dst)).status).toBe(201);
      expect((await user(method, src, to(dst))).status, `${method} ${src} -> ${dst}`).toBe(403);
      expect((await dav('PROPFIND', dst, { headers: { Depth: '0' } })).status, `${dst} still there`).toBe(207);
    }
    expect((await dav('GET', '/rv-dst/keep.txt')).body).toBe('keep');
    // With the bits, the same requests replace the destination as before.
    await makeUser(ts, await ts.login(), 'rv-all', PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE | PERM.WRITE | PERM.REMOVE | PERM.COPY | PERM.MOVE | PERM.RENAME);
    const all = davClient(ts.url, 'rv-all', 'pw-rv-all-123');
    expect((await all('COPY', '/rv-src/', to('/rv-dst/'))).status).toBe(204);
    expect((await dav('GET', '/rv-dst/keep.txt')).status).toBe(404);
    expect((await dav('GET', '/rv-dst/a.txt')).body).toBe('a');
    expect((await all('MOVE', '/rv-file.txt', to('/rv-dst'))).status).toBe(204);
    expect((await dav('GET', '/rv-dst')).body).toBe('f');
  });

  it('refused because the folder would expose a hidden entry, leaves the destination as it was', async () => {
    for (const d of ['/hs', '/hs/in', '/hd']) expect((await dav('MKCOL', d)).status).toBe(201);
    for (const [f, body] of [['/hs/in/secret.txt', 's'], ['/hs/in/seen.txt', 'v'], ['/hd/keep.txt', 'keep']]) {
      expect((await dav('PUT', f, { body })).status).toBe(201);
    }
    const admin = await ts.login();
    await addMeta(ts, admin, { path: '/hs/in', hide: '^secret' });
    await makeUser(ts, admin, 'rv-hide', PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE | ALL_FS);
    const user = davClient(ts.url, 'rv-hide', 'pw-rv-hide-123');
    const to = { headers: { Destination: `${ts.url}/dav/hd/`, Overwrite: 'T' } };
    // The hide rule stays at /hs/in: moved or copied to /hd, secret.txt would be listed there.
    for (const method of ['MOVE', 'COPY'] as const) expect((await user(method, '/hs/in/', to)).status, method).toBe(403);
    expect((await dav('GET', '/hd/keep.txt')).body).toBe('keep');
    expect((await dav('GET', '/hs/in/secret.txt')).body).toBe('s');
  });
});

describe('dead properties', () => {
  it('keep the xml:lang in scope at the property element', async () => {
    expect((await dav('PUT', '/rv-lang.txt', { body: 'l' })).status).toBe(201);
    const set = await dav('PROPPATCH', '/rv-lang.txt', {
      body:
        '<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:y="urn:y"><D:set><D:prop xml:lang="de">' +
        '<y:inherited>Grüße</y:inherited><y:own xml:lang="en">hello</y:own><y:none xml:lang="">x</y:none>' +
        '</D:prop></D:set></D:propertyupdate>',
    });
    expect(set.status).toBe(207);
    expect(set.body).not.toContain('424');
    const want = ['<inherited xmlns="urn:y" xml:lang="de">Grüße</inherited>', '<own xmlns="urn:y" xml:lang="en">hello</own>', '<none xmlns="urn:y" xml:lang="">x</none>'];
    const named = await dav('PROPFIND', '/rv-lang.txt', {
      headers: { Depth: '0' },
      body: propfindBody('<D:prop xmlns:y="urn:y"><y:inherited/><y:own/><y:none/></D:prop>'),
    });
    const all = await dav('PROPFIND', '/rv-lang.txt', { headers: { Depth: '0' }, body: propfindBody('<D:allprop/>') });
    for (const body of [named.body, all.body]) for (const w of want) expect(body).toContain(w);
    // A property set without any xml:lang in scope is answered without one.
    expect((await dav('PROPPATCH', '/rv-lang.txt', { body: '<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><z xmlns="urn:z">v</z></D:prop></D:set></D:propertyupdate>' })).status).toBe(207);
    expect((await dav('PROPFIND', '/rv-lang.txt', { headers: { Depth: '0' }, body: propfindBody('<D:prop><z xmlns="urn:z"/></D:prop>') })).body).toContain('<z xmlns="urn:z">v</z>');
  });
});
