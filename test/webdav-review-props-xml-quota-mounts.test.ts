/**
 * WebDAV PROPFIND/PROPPATCH defects a code review found (second pass; each test failed before its
 * fix): request XML that is not namespace-well-formed or not well-formed stored as a dead property
 * (and answered back broken or altered), attribute values whose tabs and line feeds changed, request
 * bodies read as UTF-8 whatever their encoding, quota figures of a storage mounted in a listed
 * folder, dead properties of a storage mounted inside a folder that is deleted, moved or copied, and
 * PROPPATCH's href for a name sent decomposed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';
import { ok } from './fs-helpers.js';
import { parseXml } from '../protocols/webdav/xml.js';

let ts: TestServer;
let dav: DavClient;
let admin: string;

beforeAll(async () => {
  ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
  admin = await ts.login();
});
afterAll(async () => {
  await ts?.close();
});

const update = (inner: string) =>
  `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:y="urn:y"><D:set><D:prop>${inner}</D:prop></D:set></D:propertyupdate>`;
const propfind = (inner: string) => `<?xml version="1.0"?><D:propfind xmlns:D="DAV:">${inner}</D:propfind>`;
const mountMemory = async (mount_path: string) =>
  ok(await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path, driver: 'Memory', addition: '{}' } }));

describe('PROPPATCH values that are not (namespace-)well-formed XML', () => {
  it('an undeclared attribute prefix or a doubled attribute is 400, and the listing stays readable', async () => {
    expect((await dav('MKCOL', '/nsf')).status).toBe(201);
    expect((await dav('PUT', '/nsf/a.txt', { body: 'a' })).status).toBe(201);
    for (const value of [
      '<y:p><v q:attr="1"/></y:p>', // q is declared nowhere
      '<y:p><v xmlns:p="urn:1" xmlns:r="urn:1" p:x="1" r:x="2"/></y:p>', // {urn:1}x twice
    ]) {
      expect((await dav('PROPPATCH', '/nsf/a.txt', { body: update(value) })).status, value).toBe(400);
    }
    // Declared prefixes still round-trip (renamed, same namespace).
    expect((await dav('PROPPATCH', '/nsf/a.txt', { body: update('<y:p><v xmlns:k="urn:k" k:x="1" x="2"/></y:p>') })).status).toBe(207);
    const listing = await dav('PROPFIND', '/nsf', { headers: { Depth: '1' } });
    expect(listing.status).toBe(207);
    expect(() => parseXml(listing.body)).not.toThrow(); // `xmlns:a0=""` would make it unreadable
    expect(listing.body).toMatch(/<v xmlns="" xmlns:a0="urn:k" a0:x="1" x="2"\/>/);
  });

  it('an undeclared entity or a reference to a character XML forbids is 400, not a changed value', async () => {
    expect((await dav('PUT', '/ent.txt', { body: 'e' })).status).toBe(201);
    for (const value of ['&Auml;', '&nbsp2;', '&#0;', '&#xD800;', '&#xFFFE;']) {
      expect((await dav('PROPPATCH', '/ent.txt', { body: update(`<y:v>${value}</y:v>`) })).status, value).toBe(400);
      expect((await dav('PROPFIND', '/ent.txt', { headers: { Depth: '0' }, body: propfind('<D:allprop/>') })).body).not.toContain('urn:y');
    }
    expect((await dav('PROPPATCH', '/ent.txt', { body: update('<y:v>&#xE9;&amp;&lt;&#x1F600;</y:v>') })).status).toBe(207);
    const r = await dav('PROPFIND', '/ent.txt', { headers: { Depth: '0' }, body: propfind('<D:prop><y:v xmlns:y="urn:y"/></D:prop>') });
    expect(r.body).toContain('<v xmlns="urn:y">é&amp;&lt;😀</v>');
  });
});

describe('dead property attributes', () => {
  it('keep a referenced tab or line feed, and read a literal one as a space (XML 1.0 §3.3.3)', async () => {
    expect((await dav('PUT', '/attr.txt', { body: 'a' })).status).toBe(201);
    const value = '<y:v><w a="x&#10;y&#9;z" b="p\nq\tr"/></y:v>';
    expect((await dav('PROPPATCH', '/attr.txt', { body: update(value) })).status).toBe(207);
    const r = await dav('PROPFIND', '/attr.txt', { headers: { Depth: '0' }, body: propfind('<D:prop><y:v xmlns:y="urn:y"/></D:prop>') });
    // Written back as is, `x\ny\tz` would read as `x y z`; `p q r` is what a parser makes of b.
    expect(r.body).toContain('<v xmlns="urn:y"><w xmlns="" a="x&#10;y&#9;z" b="p q r"/></v>');
  });
});

describe('request bodies in another encoding than UTF-8', () => {
  it('UTF-16 and a declared ISO-8859-1 are read as such; bytes that are no UTF-8 are 400', async () => {
    expect((await dav('PUT', '/enc.txt', { body: 'e' })).status).toBe(201);
    const utf16 = Buffer.concat([
      Buffer.from([0xff, 0xfe]),
      Buffer.from('<?xml version="1.0" encoding="UTF-16"?><D:propfind xmlns:D="DAV:"><D:prop><D:getcontentlength/></D:prop></D:propfind>', 'utf16le'),
    ]);
    const pf = await dav('PROPFIND', '/enc.txt', { headers: { Depth: '0' }, body: utf16 });
    expect(pf.status).toBe(207);
    expect(pf.body).toContain('<D:getcontentlength>1</D:getcontentlength>');
    const value = (enc: string) =>
      `<?xml version="1.0"${enc}?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><y:v xmlns:y="urn:y">caf\xe9</y:v></D:prop></D:set></D:propertyupdate>`;
    expect((await dav('PROPPATCH', '/enc.txt', { body: Buffer.from(value(''), 'latin1') })).status).toBe(400); // 0xE9 alone is no UTF-8
    expect((await dav('PROPPATCH', '/enc.txt', { body: Buffer.from(value(' encoding="ISO-8859-1"'), 'latin1') })).status).toBe(207);
    const r = await dav('PROPFIND', '/enc.txt', { headers: { Depth: '0' }, body: propfind('<D:prop><y:v xmlns:y="urn:y"/></D:prop>') });
    expect(r.body).toContain('<v xmlns="urn:y">café</v>');
  });
});

describe('quota of a storage mounted in a listed folder', () => {
  it('is that storage\'s, as a PROPFIND of the mount point itself answers', async () => {
    expect((await dav('MKCOL', '/qf')).status).toBe(201);
    await mountMemory('/qf/mem');
    expect((await dav('PUT', '/qf/mem/five.txt', { body: '12345' })).status).toBe(201);
    const body = propfind('<D:prop><D:quota-used-bytes/><D:quota-available-bytes/></D:prop>');
    const own = await dav('PROPFIND', '/qf/mem', { headers: { Depth: '0' }, body });
    expect(own.body).toContain('<D:quota-used-bytes>5</D:quota-used-bytes>');
    expect(own.body).toMatch(/<D:propstat><D:prop><D:quota-available-bytes\/><\/D:prop><D:status>HTTP\/1.1 404/); // Memory knows no free space
    const listed = await dav('PROPFIND', '/qf', { headers: { Depth: '1' }, body });
    const mem = listed.body.match(/<D:response><D:href>\/dav\/qf\/mem\/<\/D:href>.*?<\/D:response>/)?.[0];
    expect(mem).toBeDefined();
    expect(mem!.slice(mem!.indexOf('</D:href>'))).toBe(own.body.slice(own.body.indexOf('</D:href>'), own.body.indexOf('</D:multistatus>')));
    // The folder itself still answers its own storage's (local: both figures known).
    expect(listed.body).toMatch(/<D:href>\/dav\/qf\/<\/D:href><D:propstat><D:prop><D:quota-used-bytes>\d+<\/D:quota-used-bytes><D:quota-available-bytes>\d+/);
  });
});

describe('dead properties of a storage mounted inside a folder', () => {
  const setProp = (p: string) => dav('PROPPATCH', p, { body: update('<y:kept>yes</y:kept>') });
  const hasProp = async (p: string) => {
    const r = await dav('PROPFIND', p, { headers: { Depth: '0' }, body: propfind('<D:prop><y:kept xmlns:y="urn:y"/></D:prop>') });
    expect(r.status, p).toBe(207);
    return r.body.includes('>yes</kept>');
  };
  const prepare = async (dir: string) => {
    expect((await dav('MKCOL', dir)).status).toBe(201);
    await mountMemory(`${dir}/m`);
    expect((await dav('PUT', `${dir}/m/f.txt`, { body: 'f' })).status).toBe(201);
    expect((await setProp(`${dir}/m/f.txt`)).status).toBe(207);
    expect((await setProp(`${dir}/m`)).status).toBe(207);
    expect((await dav('PUT', `${dir}/own.txt`, { body: 'o' })).status).toBe(201);
    expect((await setProp(`${dir}/own.txt`)).status).toBe(207);
  };

  it('stay with its files when the folder holding its mount point is deleted (WebDAV or REST)', async () => {
    await prepare('/mda');
    expect((await dav('DELETE', '/mda')).status).toBe(204);
    expect(await hasProp('/mda/m/f.txt')).toBe(true); // still there, served by the Memory storage
    expect(await hasProp('/mda/m')).toBe(true);
    await prepare('/mdr');
    ok(await ts.api('/api/fs/remove', { token: admin, body: { dir: '/', names: ['mdr'] } }));
    expect((await dav('PROPFIND', '/mdr/own.txt', { headers: { Depth: '0' } })).status).toBe(404);
    expect(await hasProp('/mdr/m/f.txt')).toBe(true);
  });

  it('stay with its files when that folder is moved', async () => {
    await prepare('/mmv');
    expect((await dav('MOVE', '/mmv', { headers: { Destination: `${ts.url}/dav/mmv2` } })).status).toBe(201);
    expect(await hasProp('/mmv2/own.txt')).toBe(true);
    expect(await hasProp('/mmv/m/f.txt')).toBe(true);
    expect(await hasProp('/mmv/m')).toBe(true);
  });

  it('are not copied with that folder onto files that are not there', async () => {
    await prepare('/mcp');
    expect((await dav('COPY', '/mcp', { headers: { Destination: `${ts.url}/dav/mcp2` } })).status).toBe(201);
    expect(await hasProp('/mcp2/own.txt')).toBe(true);
    expect(await hasProp('/mcp/m/f.txt')).toBe(true);
    // What is made later at the copy's path of the mounted file is a new file, without properties.
    expect((await dav('MKCOL', '/mcp2/m')).status).toBe(201);
    expect((await dav('PUT', '/mcp2/m/f.txt', { body: 'new' })).status).toBe(201);
    expect(await hasProp('/mcp2/m/f.txt')).toBe(false);
    expect(await hasProp('/mcp2/m')).toBe(false);
  });
});

describe('PROPPATCH href', () => {
  it('is the path as the client sent it (decomposed), as PROPFIND\'s', async () => {
    expect((await dav('PUT', '/caf%C3%A9.txt', { body: 'c' })).status).toBe(201); // stored composed
    const nfd = '/cafe%CC%81.txt';
    const pf = await dav('PROPFIND', nfd, { headers: { Depth: '0' } });
    expect(pf.body).toContain('<D:href>/dav/cafe%CC%81.txt</D:href>');
    const pp = await dav('PROPPATCH', nfd, { body: update('<y:n>1</y:n>') });
    expect(pp.status).toBe(207);
    expect(pp.body).toContain('<D:href>/dav/cafe%CC%81.txt</D:href>');
  });
});
