/**
 * WebDAV defects a protocol probe found (each test failed before its fix): COPY/MOVE onto an ancestor
 * of the source, PUT with Content-Range, HTTP preconditions on writes, shared locks, raw UTF-8 in
 * headers, Object.prototype names as property/entity/extension names, If-Range dates, quota in
 * allprop+include, empty prop, and the 423 body.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';

let ts: TestServer;
let dav: DavClient;
const lockinfo = (scope = 'exclusive') =>
  `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:${scope}/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>me</D:owner></D:lockinfo>`;
const tokenOf = (h: string | string[] | undefined) => String(h).replace(/^<|>$/g, '');
const propfindBody = (inner: string) => `<?xml version="1.0"?><D:propfind xmlns:D="DAV:">${inner}</D:propfind>`;
/** A header value whose bytes on the wire are the UTF-8 of `s` (Node writes header strings as latin1). */
const rawUtf8 = (s: string) => Buffer.from(s, 'utf8').toString('latin1');

beforeAll(async () => {
  ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
});
afterAll(async () => {
  await ts?.close();
});

describe('COPY/MOVE onto an ancestor of the source', () => {
  it('is refused with 409 before anything is deleted', async () => {
    expect((await dav('MKCOL', '/anc/')).status).toBe(201);
    expect((await dav('MKCOL', '/anc/child/')).status).toBe(201);
    expect((await dav('PUT', '/anc/child/keep.txt', { body: 'keep' })).status).toBe(201);
    for (const [m, src, dst] of [
      ['MOVE', '/anc/child/', '/dav/anc/'],
      ['COPY', '/anc/child/', '/dav/anc/'],
      ['MOVE', '/anc/child/keep.txt', '/dav/anc/'],
      ['COPY', '/anc/child/keep.txt', `${ts.url}/dav/anc/child/`],
      ['MOVE', '/anc/child/', '/dav/'],
    ] as const) {
      const r = await dav(m, src, { headers: { Destination: dst } });
      expect(r.status, `${m} ${src} -> ${dst}`).toBe(409);
    }
    expect((await dav('GET', '/anc/child/keep.txt')).body).toBe('keep');
  });
});

describe('PUT with Content-Range', () => {
  it('is 400 and leaves the file alone', async () => {
    expect((await dav('PUT', '/cr.txt', { body: '0123456789' })).status).toBe(201);
    const r = await dav('PUT', '/cr.txt', { body: 'ab', headers: { 'Content-Range': 'bytes 2-3/10' } });
    expect(r.status).toBe(400);
    expect((await dav('GET', '/cr.txt')).body).toBe('0123456789');
  });
});

describe('PUT to a URL ending in /', () => {
  it('is 409 and creates nothing, whether the name exists or not', async () => {
    expect((await dav('PUT', '/slash/', { body: 'x' })).status).toBe(409);
    expect((await dav('GET', '/slash')).status).toBe(404);
    expect((await dav('PUT', '/slash-file.txt', { body: 'keep' })).status).toBe(201);
    expect((await dav('PUT', '/slash-file.txt/?a=1', { body: 'bad' })).status).toBe(409);
    expect((await dav('GET', '/slash-file.txt')).body).toBe('keep');
  });
});

describe('HTTP preconditions on writes', () => {
  it('PUT honours If-Match, If-None-Match and If-Unmodified-Since', async () => {
    expect((await dav('PUT', '/pc.txt', { body: 'one', headers: { 'X-OC-Mtime': '1700000000' } })).status).toBe(201);
    const etag = String((await dav('GET', '/pc.txt')).headers['etag']);
    expect((await dav('PUT', '/pc.txt', { body: 'bad', headers: { 'If-Match': '"nope"' } })).status).toBe(412);
    expect((await dav('PUT', '/pc.txt', { body: 'bad', headers: { 'If-None-Match': '*' } })).status).toBe(412);
    expect((await dav('PUT', '/pc.txt', { body: 'bad', headers: { 'If-None-Match': etag } })).status).toBe(412);
    const old = new Date(1600000000_000).toUTCString();
    expect((await dav('PUT', '/pc.txt', { body: 'bad', headers: { 'If-Unmodified-Since': old } })).status).toBe(412);
    expect((await dav('PUT', '/pc-missing.txt', { body: 'bad', headers: { 'If-Match': '*' } })).status).toBe(412);
    expect((await dav('GET', '/pc.txt')).body).toBe('one');
    expect((await dav('GET', '/pc-missing.txt')).status).toBe(404);
    // The ones that hold.
    expect((await dav('PUT', '/pc.txt', { body: 'two', headers: { 'If-Match': etag } })).status).toBe(204);
    expect((await dav('PUT', '/pc-new.txt', { body: 'new', headers: { 'If-None-Match': '*' } })).status).toBe(201);
    expect((await dav('GET', '/pc.txt')).body).toBe('two');
  });

  it('DELETE, MOVE and PROPPATCH honour If-Match', async () => {
    expect((await dav('PUT', '/pd.txt', { body: 'x' })).status).toBe(201);
    expect((await dav('DELETE', '/pd.txt', { headers: { 'If-Match': '"nope"' } })).status).toBe(412);
    expect((await dav('DELETE', '/pd.txt', { headers: { 'If-None-Match': '*' } })).status).toBe(412);
    expect((await dav('MOVE', '/pd.txt', { headers: { Destination: '/dav/pd2.txt', 'If-Match': '"nope"' } })).status).toBe(412);
    const pp = '<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><x:a xmlns:x="urn:x">1</x:a></D:prop></D:set></D:propertyupdate>';
    expect((await dav('PROPPATCH', '/pd.txt', { body: pp, headers: { 'If-Match': '"nope"' } })).status).toBe(412);
    expect((await dav('GET', '/pd.txt')).status).toBe(200);
    const etag = String((await dav('GET', '/pd.txt')).headers['etag']);
    expect((await dav('DELETE', '/pd.txt', { headers: { 'If-Match': etag } })).status).toBe(204);
  });
});

describe('shared locks', () => {
  it('any one holder writes with its own token, but only where its lock reaches', async () => {
    expect((await dav('PUT', '/sh.txt', { body: 'x' })).status).toBe(201);
    const t1 = tokenOf((await dav('LOCK', '/sh.txt', { body: lockinfo('shared'), headers: { Depth: '0' } })).headers['lock-token']);
    const t2 = tokenOf((await dav('LOCK', '/sh.txt', { body: lockinfo('shared'), headers: { Depth: '0' } })).headers['lock-token']);
    expect(t1).not.toBe(t2);
    expect((await dav('PUT', '/sh.txt', { body: 'y' })).status).toBe(423);
    expect((await dav('PUT', '/sh.txt', { body: 'y', headers: { If: `(<${t1}>)` } })).status).toBe(204);
    expect((await dav('PUT', '/sh.txt', { body: 'z', headers: { If: `(<${t2}>)` } })).status).toBe(204);
    for (const t of [t1, t2]) expect((await dav('UNLOCK', '/sh.txt', { headers: { 'Lock-Token': `<${t}>` } })).status).toBe(204);
    // A shared lock on the folder does not let its holder delete a member another client locked.
    expect((await dav('MKCOL', '/shd/')).status).toBe(201);
    expect((await dav('PUT', '/shd/m.txt', { body: 'm' })).status).toBe(201);
    const f = tokenOf((await dav('LOCK', '/shd/m.txt', { body: lockinfo('shared'), headers: { Depth: '0' } })).headers['lock-token']);
    const d = tokenOf((await dav('LOCK', '/shd/', { body: lockinfo('shared'), headers: { Depth: '0' } })).headers['lock-token']);
    expect((await dav('DELETE', '/shd/', { headers: { If: `<${ts.url}/dav/shd/m.txt> (<${f}>)` } })).status).toBe(423);
    expect((await dav('DELETE', '/shd/', { headers: { If: `(<${d}>)` } })).status).toBe(423);
    expect((await dav('DELETE', '/shd/', { headers: { If: `<${ts.url}/dav/shd/> (<${d}>) <${ts.url}/dav/shd/m.txt> (<${f}>)` } })).status).toBe(204);
  });
});

describe('raw UTF-8 in headers', () => {
  it('Destination and If URLs are read as UTF-8', async () => {
    expect((await dav('MKCOL', '/raw/')).status).toBe(201);
    expect((await dav('PUT', '/raw/r.txt', { body: 'r' })).status).toBe(201);
    expect((await dav('COPY', '/raw/r.txt', { headers: { Destination: rawUtf8('/dav/raw/ünï.txt') } })).status).toBe(201);
    expect(readdirSync(join(ts.dataDir, 'storage', 'raw')).sort()).toEqual(['r.txt', 'ünï.txt']);
    expect((await dav('GET', '/raw/%C3%BCn%C3%AF.txt')).body).toBe('r');
    const t = tokenOf((await dav('LOCK', '/raw/%C3%BCn%C3%AF.txt', { body: lockinfo(), headers: { Depth: '0' } })).headers['lock-token']);
    const If = rawUtf8(`<${ts.url}/dav/raw/ünï.txt> (<${t}>)`);
    // A Buffer body: with a string body Node writes the header block in the body's encoding (UTF-8 again).
    expect((await dav('PUT', '/raw/%C3%BCn%C3%AF.txt', { body: Buffer.from('w'), headers: { If } })).status).toBe(204);
    expect((await dav('UNLOCK', '/raw/%C3%BCn%C3%AF.txt', { headers: { 'Lock-Token': `<${t}>` } })).status).toBe(204);
  });
});

describe('Object.prototype names', () => {
  it('are ordinary unknown names for PROPFIND, PROPPATCH, entities and content types', async () => {
    expect((await dav('PUT', '/a.constructor', { body: 'c' })).status).toBe(201);
    const g = await dav('GET', '/a.constructor');
    expect(g.headers['content-type']).toBe('application/octet-stream');
    const names = ['constructor', '__proto__', 'valueOf', 'hasOwnProperty', 'toString'];
    const pf = await dav('PROPFIND', '/a.constructor', {
      headers: { Depth: '0' },
      body: propfindBody(`<D:prop>${names.map((n) => `<D:${n}/>`).join('')}</D:prop>`),
    });
    expect(pf.status).toBe(207);
    expect(pf.body).not.toContain('[object');
    expect(pf.body).toContain('HTTP/1.1 404 Not Found');
    for (const n of names) expect(pf.body).toContain(`<D:${n}/>`);
    const set = await dav('PROPPATCH', '/a.constructor', {
      body: '<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><D:constructor>x</D:constructor><x:v xmlns:x="urn:x">a&constructor;b</x:v></D:prop></D:set></D:propertyupdate>',
    });
    expect(set.status).toBe(400); // unknown entity
    const ok = await dav('PROPPATCH', '/a.constructor', {
      body: '<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><D:constructor>x</D:constructor></D:prop></D:set></D:propertyupdate>',
    });
    expect([ok.status, ok.body.includes('200 OK')]).toEqual([207, true]);
    const back = await dav('PROPFIND', '/a.constructor', { headers: { Depth: '0' }, body: propfindBody('<D:prop><D:constructor/></D:prop>') });
    expect(back.body).toContain('<constructor xmlns="DAV:">x</constructor>');
  });
});

describe('If-Range with a date', () => {
  it('needs an exact Last-Modified match', async () => {
    expect((await dav('PUT', '/ir.txt', { body: '0123456789', headers: { 'X-OC-Mtime': '1700000000' } })).status).toBe(201);
    const lm = String((await dav('GET', '/ir.txt')).headers['last-modified']);
    expect((await dav('GET', '/ir.txt', { headers: { Range: 'bytes=2-4', 'If-Range': lm } })).status).toBe(206);
    expect((await dav('PUT', '/ir.txt', { body: 'abcdefghij', headers: { 'X-OC-Mtime': '1600000000' } })).status).toBe(204);
    const r = await dav('GET', '/ir.txt', { headers: { Range: 'bytes=2-4', 'If-Range': lm } });
    expect([r.status, r.body]).toEqual([200, 'abcdefghij']);
  });
});

describe('PROPFIND details', () => {
  it('allprop with include returns the quota properties', async () => {
    const r = await dav('PROPFIND', '/', {
      headers: { Depth: '0' },
      body: propfindBody('<D:allprop/><D:include><D:quota-available-bytes/><D:quota-used-bytes/></D:include>'),
    });
    expect(r.status).toBe(207);
    expect(r.body).toMatch(/<D:quota-available-bytes>\d+<\/D:quota-available-bytes>/);
    expect(r.body).toMatch(/<D:quota-used-bytes>\d+<\/D:quota-used-bytes>/);
  });

  it('an empty prop still answers one propstat per response', async () => {
    const r = await dav('PROPFIND', '/', { headers: { Depth: '0' }, body: propfindBody('<D:prop/>') });
    expect(r.status).toBe(207);
    expect(r.body).toMatch(/<D:response><D:href>[^<]+<\/D:href><D:propstat>/);
  });

  it('423 names the locked resource in lock-token-submitted', async () => {
    expect((await dav('MKCOL', '/l423/')).status).toBe(201);
    const t = tokenOf((await dav('LOCK', '/l423/', { body: lockinfo() })).headers['lock-token']);
    const r = await dav('PUT', '/l423/x.txt', { body: 'x' });
    expect(r.status).toBe(423);
    expect(r.body).toContain('<D:lock-token-submitted><D:href>/dav/l423/</D:href></D:lock-token-submitted>');
    expect((await dav('UNLOCK', '/l423/', { headers: { 'Lock-Token': `<${t}>` } })).status).toBe(204);
  });
});

describe('locks and dead properties follow changes made over other protocols', () => {
  it('a file deleted over REST is no longer locked; a file renamed over REST keeps its properties', async () => {
    const token = await ts.login();
    expect((await dav('PUT', '/follow.txt', { body: 'x' })).status).toBe(201);
    expect((await dav('LOCK', '/follow.txt', { body: lockinfo() })).status).toBe(200);
    expect((await dav('PUT', '/follow.txt', { body: 'y' })).status).toBe(423);
    expect(await ts.api('/api/fs/remove', { token, body: { dir: '/', names: ['follow.txt'] } })).toMatchObject({ code: 200 });
    // A new file of the same name, by a client that never saw the old lock.
    expect((await dav('PUT', '/follow.txt', { body: 'new' })).status).toBe(201);

    const set = `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:tag>kept</Z:tag></D:prop></D:set></D:propertyupdate>`;
    expect((await dav('PROPPATCH', '/follow.txt', { body: set })).status).toBe(207);
    expect(await ts.api('/api/fs/rename', { token, body: { path: '/follow.txt', name: 'renamed.txt' } })).toMatchObject({ code: 200 });
    const tagAt = async (p: string) => (await dav('PROPFIND', p, { body: propfindBody('<D:prop><Z:tag xmlns:Z="urn:z"/></D:prop>'), headers: { Depth: '0' } })).body;
    expect(await tagAt('/renamed.txt')).toContain('kept</');
    // The old name holds no properties: a new file there starts clean.
    expect((await dav('PUT', '/follow.txt', { body: 'again' })).status).toBe(201);
    expect(await tagAt('/follow.txt')).not.toContain('kept</');
  });
});
