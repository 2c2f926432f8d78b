/**
 * WebDAV defects an adversarial client-quirk probe found (each test failed before its fix): XML
 * names the parser refused or renamed, nesting beyond the parser's limit (500s), quadratic
 * PROPPATCH/PROPFIND on many property names, DELETE of a user's own root, hidden names leaking
 * through 423 bodies, and relative Destination headers. Also COPY and MOVE between storages.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';
import { addMeta, makeUser, PERM } from './fs-helpers.js';

let ts: TestServer;
let dav: DavClient;
const as = (u: string) => davClient(ts.url, u, `pw-${u}-123`);
const RW = PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE | PERM.WRITE | PERM.RENAME | PERM.MOVE | PERM.COPY | PERM.REMOVE;
const lockinfo = `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`;
const propfindBody = (inner: string) => `<?xml version="1.0"?><D:propfind xmlns:D="DAV:">${inner}</D:propfind>`;
const setBody = (inner: string) => `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set>${inner}</D:set></D:propertyupdate>`;

beforeAll(async () => {
  ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
});
afterAll(async () => {
  await ts?.close();
});

describe('XML request bodies', () => {
  it('element and attribute names that are Object.prototype members are ordinary names', async () => {
    expect((await dav('PUT', '/names.txt', { body: 'n' })).status).toBe(201);
    // Unprefixed names in a default namespace: the parser threw on these (500) or renamed them.
    const set = await dav('PROPPATCH', '/names.txt', {
      body: setBody('<D:prop><constructor xmlns="urn:x"><v prototype="p">c</v></constructor><toString xmlns="urn:x">t</toString></D:prop>'),
    });
    expect(set.status).toBe(207);
    expect(set.body).toContain('HTTP/1.1 200 OK');
    const get = await dav('PROPFIND', '/names.txt', {
      headers: { Depth: '0' },
      body: '<propfind xmlns="DAV:"><prop><constructor xmlns="urn:x"/><toString xmlns="urn:x"/><__proto__ xmlns="urn:x"/></prop></propfind>',
    });
    expect(get.status).toBe(207);
    expect(get.body).toContain('<constructor xmlns="urn:x"><v xmlns="urn:x" prototype="p">c</v></constructor>');
    expect(get.body).toContain('<toString xmlns="urn:x">t</toString>'); // not stored as __toString
    expect(get.body).toMatch(/<__proto__ xmlns="urn:x"\/><\/D:prop><D:status>HTTP\/1.1 404 Not Found/);
  });

  it('nesting deeper than the parser allows is 400, not 500', async () => {
    const deep = '<x:a xmlns:x="urn:x">'.repeat(500) + '</x:a>'.repeat(500);
    expect((await dav('PROPPATCH', '/names.txt', { body: setBody(`<D:prop>${deep}</D:prop>`) })).status).toBe(400);
    expect((await dav('PROPFIND', '/names.txt', { headers: { Depth: '0' }, body: propfindBody(`<D:prop>${deep}</D:prop>`) })).status).toBe(400);
    expect(ts.logs.filter((l) => /"level":50/.test(l))).toEqual([]);
  });

  it('many property names: past the per-resource bound PROPPATCH is 507 and stores nothing; below it all are kept and found', async () => {
    expect((await dav('PUT', '/many-props.txt', { body: 'm' })).status).toBe(201);
    const names = (n: number) => Array.from({ length: n }, (_, i) => `<x:p${i}/>`).join('');
    const tooMany = await dav('PROPPATCH', '/many-props.txt', { body: setBody(`<D:prop xmlns:x="urn:x">${names(90_000)}</D:prop>`) });
    expect(tooMany.status).toBe(507);
    // ~5,000 names: a scan per name (set, or looked up) made such requests quadratic.
    const set = await dav('PROPPATCH', '/many-props.txt', { body: setBody(`<D:prop xmlns:x="urn:x">${names(5_000)}</D:prop>`) });
    expect(set.status).toBe(207);
    const get = await dav('PROPFIND', '/many-props.txt', { headers: { Depth: '0' }, body: propfindBody(`<D:prop xmlns:x="urn:x">${names(5_000)}</D:prop>`) });
    expect(get.status).toBe(207);
    expect(get.body).toContain('<p4999 xmlns="urn:x"/>');
    expect(get.body).not.toContain('404 Not Found');
  });
});

describe('users with a base path', () => {
  it('cannot DELETE their own root (the base folder itself)', async () => {
    for (const d of ['/home', '/home/carol']) expect((await dav('MKCOL', d)).status).toBe(201);
    expect((await dav('PUT', '/home/carol/c.txt', { body: 'carol' })).status).toBe(201);
    await makeUser(ts, await ts.login(), 'carol', RW, '/home/carol');
    const carol = as('carol');
    expect((await carol('DELETE', '/')).status).toBe(403);
    expect((await carol('DELETE', '')).status).toBe(403); // `/dav` without the slash
    expect((await dav('GET', '/home/carol/c.txt')).body).toBe('carol');
    // Her members stay hers to delete.
    expect((await carol('DELETE', '/c.txt')).status).toBe(204);
  });
});

describe('meta rules', () => {
  it('a 423 does not name a hidden resource', async () => {
    expect((await dav('MKCOL', '/pub')).status).toBe(201);
    for (const f of ['/pub/visible.txt', '/pub/secret.txt']) expect((await dav('PUT', f, { body: 'x' })).status).toBe(201);
    const token = await ts.login();
    await addMeta(ts, token, { path: '/pub', hide: 'secret', h_sub: true });
    await makeUser(ts, token, 'bob', RW);
    const l = await dav('LOCK', '/pub/secret.txt', { body: lockinfo });
    expect(l.status).toBe(200);
    try {
      const del = await as('bob')('DELETE', '/pub/');
      expect(del.status).toBe(423);
      expect(del.body).toContain('<D:lock-token-submitted><D:href>/dav/pub/</D:href></D:lock-token-submitted>');
      expect(del.body).not.toContain('secret');
      // A visible locked resource is still named as itself.
      const vl = await dav('LOCK', '/pub/visible.txt', { body: lockinfo });
      const put = await as('bob')('PUT', '/pub/visible.txt', { body: 'y' });
      expect([put.status, put.body.includes('<D:href>/dav/pub/visible.txt</D:href>')]).toEqual([423, true]);
      await dav('UNLOCK', '/pub/visible.txt', { headers: { 'Lock-Token': String(vl.headers['lock-token']) } });
    } finally {
      await dav('UNLOCK', '/pub/secret.txt', { headers: { 'Lock-Token': String(l.headers['lock-token']) } });
    }
  });
});

describe('Destination', () => {
  it('a relative reference is 400; an absolute path outside /dav stays 502 and logs no error', async () => {
    expect((await dav('PUT', '/src.txt', { body: 's' })).status).toBe(201);
    expect((await dav('COPY', '/src.txt', { headers: { Destination: 'dst.txt' } })).status).toBe(400);
    expect((await dav('COPY', '/src.txt', { headers: { Destination: 'dav/dst.txt' } })).status).toBe(400);
    expect((await dav('COPY', '/src.txt', { headers: { Destination: '/api/fs/dst.txt' } })).status).toBe(502);
    expect((await dav('GET', '/dst.txt')).status).toBe(404);
    expect(ts.logs.filter((l) => /"level":50/.test(l))).toEqual([]);
  });
});

describe('COPY and MOVE between storages (one drive, several storages)', () => {
  let other: string;
  beforeAll(async () => {
    other = await mkdtemp(join(tmpdir(), 'tg-dav-other-'));
    const token = await ts.login();
    const r = await ts.api('/api/admin/storage/create', { token, body: { mount_path: '/other', driver: 'Local', addition: JSON.stringify({ root_folder_path: other }) } });
    expect(r, JSON.stringify(r)).toMatchObject({ code: 200 });
    for (const d of ['/x', '/x/tree', '/x/tree/sub']) expect((await dav('MKCOL', d)).status).toBe(201);
    for (const f of ['/x/tree/a.txt', '/x/tree/sub/b.txt', '/x/file.txt']) expect((await dav('PUT', f, { body: `body of ${f}` })).status).toBe(201);
  });
  afterAll(() => rm(other, { recursive: true, force: true }));
  const onDisk = (p: string) => readFile(join(other, p), 'utf8');

  it('COPY of a folder is made member by member', async () => {
    expect((await dav('COPY', '/x/tree', { headers: { Destination: '/dav/other/tree-copy' } })).status).toBe(201);
    expect(await onDisk('tree-copy/a.txt')).toBe('body of /x/tree/a.txt');
    expect(await onDisk('tree-copy/sub/b.txt')).toBe('body of /x/tree/sub/b.txt');
    expect((await dav('GET', '/x/tree/a.txt')).status).toBe(200);
  });

  it('MOVE of a file and of a folder is a copy, then the source goes', async () => {
    expect((await dav('MOVE', '/x/file.txt', { headers: { Destination: '/dav/other/file.txt' } })).status).toBe(201);
    expect(await onDisk('file.txt')).toBe('body of /x/file.txt');
    expect((await dav('GET', '/x/file.txt')).status).toBe(404);
    expect((await dav('MOVE', '/x/tree', { headers: { Destination: '/dav/other/tree' } })).status).toBe(201);
    expect(await onDisk('tree/sub/b.txt')).toBe('body of /x/tree/sub/b.txt');
    expect((await dav('PROPFIND', '/x/tree', { headers: { Depth: '0' } })).status).toBe(404);
  });

  it('MOVE by a user who cannot see everything: hidden entries are neither copied nor deleted', async () => {
    for (const d of ['/h', '/h/box']) expect((await dav('MKCOL', d)).status).toBe(201);
    for (const f of ['/h/box/seen.txt', '/h/box/secret.txt']) expect((await dav('PUT', f, { body: f })).status).toBe(201);
    const token = await ts.login();
    await addMeta(ts, token, { path: '/h', hide: '^secret', h_sub: true });
    await makeUser(ts, token, 'mover', RW);
    expect((await as('mover')('MOVE', '/h/box', { headers: { Destination: '/dav/other/box' } })).status).toBe(201);
    expect(await onDisk('box/seen.txt')).toBe('/h/box/seen.txt');
    expect((await dav('GET', '/h/box/secret.txt')).body).toBe('/h/box/secret.txt');
    expect((await dav('GET', '/h/box/seen.txt')).status).toBe(404);
  });
});
