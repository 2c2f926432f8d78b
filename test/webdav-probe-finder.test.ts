/**
 * Client-emulation probe (macOS Finder, WebDAVFS 3), its requests reproduced on the wire: chunked
 * PUTs with X-Expected-Entity-Length, LOCK → PUT (If) → PROPPATCH → UNLOCK on every save,
 * AppleDouble `._` files, PROPFINDs with its property set, and decomposed (NFD) names. Defects found
 * (each test failed before its fix):
 * - Finder sends every name decomposed (NFD), whatever the href it listed. A file or folder named
 *   composed (NFC: by Windows, Linux, REST, SFTP) was listed but answered 404 to Finder's GET, PUT,
 *   MOVE, DELETE, and a save created a second, identical-looking file next to it.
 * - A MOVE or COPY over a locked file (with the token) dropped the destination's lock (RFC 4918 §7.5
 *   wants the new resource under it): the holder's later writes with its token, refresh and UNLOCK failed.
 */
import { readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient, type DavResponse } from './clients/webdav.js';

let ts: TestServer;
let dav: DavClient;
const AUTH = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
const UA = 'WebDAVFS/3.0.0 (03008000) Darwin/22.6.0 (arm64)';

beforeAll(async () => {
  ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
});
afterAll(async () => {
  await ts?.close();
});

const onDisk = (p: string) => readFile(join(ts.dataDir, 'storage', p));

/** A request as WebDAVFS sends it: its User-Agent, and a body in chunks (`Transfer-Encoding: chunked`, no Content-Length). */
function finder(method: string, path: string, opts: { headers?: Record<string, string>; chunks?: Buffer[]; body?: string; agent?: Agent } = {}): Promise<DavResponse> {
  const u = new URL(ts.url);
  const headers: Record<string, string> = { authorization: AUTH, 'user-agent': UA, ...(opts.headers ?? {}) };
  if (opts.body !== undefined) headers['content-length'] = String(Buffer.byteLength(opts.body));
  if (opts.chunks) headers['transfer-encoding'] = 'chunked';
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: '/dav' + path, method, headers, agent: opts.agent }, (res) => {
      const got: Buffer[] = [];
      res.on('data', (c: Buffer) => got.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(got).toString('utf8') }));
      res.on('error', reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error(`${method} ${path}: timeout`)));
    req.on('error', reject);
    if (opts.chunks) for (const c of opts.chunks) req.write(c);
    req.end(opts.body);
  });
}

const FINDER_LOCK =
  '<?xml version="1.0" encoding="utf-8"?>\n<D:lockinfo xmlns:D="DAV:">\n<D:lockscope><D:exclusive/></D:lockscope>\n' +
  '<D:locktype><D:write/></D:locktype>\n<D:owner>\n<D:href>http://www.apple.com/webdav_fs/</D:href>\n</D:owner>\n</D:lockinfo>\n';
const FINDER_PROPS =
  '<?xml version="1.0" encoding="utf-8"?>\n<D:propfind xmlns:D="DAV:" xmlns:A="http://www.apple.com/webdav_fs/props/">\n<D:prop>\n' +
  '<D:getlastmodified/>\n<D:getcontentlength/>\n<D:creationdate/>\n<D:resourcetype/>\n<D:getetag/>\n' +
  '<D:quota-available-bytes/>\n<D:quota-used-bytes/>\n<A:appledoubleheader/>\n</D:prop>\n</D:propfind>\n';
const tokenOf = (h: unknown) => /<([^>]+)>/.exec(String(h))![1]!;
const lockOf = (body: string) => /<D:lockdiscovery>(.*)<\/D:lockdiscovery>/s.exec(body)?.[1] ?? '';
const hrefs = (body: string) => [...body.matchAll(/<D:href>([^<]*)<\/D:href>/g)].map((m) => m[1]!);
const enc = (p: string) => p.split('/').map(encodeURIComponent).join('/');
const nfd = (s: string) => s.normalize('NFD');
const storageDir = (p = '') => join(ts.dataDir, 'storage', p);

describe('mounting', () => {
  it('OPTIONS and Depth 0 PROPFIND on the mount URL, with and without the slash; an empty-body PROPFIND is allprop', async () => {
    for (const p of ['', '/']) {
      const o = await finder('OPTIONS', p);
      expect(o.status).toBe(200);
      expect(String(o.headers.dav)).toMatch(/\b2\b/); // class 2: without it WebDAVFS mounts read-only
      const pf = await finder('PROPFIND', p, { headers: { Depth: '0', 'Content-Type': 'text/xml; charset="utf-8"' }, body: FINDER_PROPS });
      expect(pf.status).toBe(207);
      expect(hrefs(pf.body)).toEqual(['/dav/']);
      expect(pf.body).toMatch(/<D:quota-available-bytes>\d+<\/D:quota-available-bytes>/);
      expect(pf.body).toMatch(/<D:quota-used-bytes>\d+<\/D:quota-used-bytes>/);
      expect(pf.body).toContain('<D:resourcetype><D:collection/></D:resourcetype>');
      expect(pf.body).toMatch(/<appledoubleheader xmlns="http:\/\/www.apple.com\/webdav_fs\/props\/"\/><\/D:prop><D:status>HTTP\/1.1 404/);
      const empty = await finder('PROPFIND', p, { headers: { Depth: '1', 'Content-Type': 'text/xml', 'Content-Length': '0' } });
      expect(empty.status).toBe(207);
      expect(empty.body).toContain('<D:getlastmodified>');
      expect((await finder('PROPFIND', p, { headers: { Depth: '0' }, chunks: [] })).status).toBe(207);
    }
  });
});

describe("Finder's save", () => {
  it('LOCK on a new name (201, empty file), chunked PUTs with the token, PROPPATCH, refresh, UNLOCK', async () => {
    const lock = await finder('LOCK', '/doc.txt', { headers: { Depth: '0', Timeout: 'Second-600' }, body: FINDER_LOCK });
    expect(lock.status).toBe(201);
    expect((await onDisk('doc.txt')).length).toBe(0);
    const token = tokenOf(lock.headers['lock-token']);
    expect((await finder('PUT', '/doc.txt', { chunks: [Buffer.from('other')] })).status).toBe(423);
    const put = await finder('PUT', '/doc.txt', { headers: { If: `(<${token}>)`, 'X-Expected-Entity-Length': '11' }, chunks: [Buffer.from('hello '), Buffer.from('world')] });
    expect(put.status).toBe(204);
    expect((await onDisk('doc.txt')).toString()).toBe('hello world');
    // A truncating save: a 0-byte chunked body, tagged If.
    expect((await finder('PUT', '/doc.txt', { headers: { If: `<${ts.url}/dav/doc.txt> (<${token}>)`, 'X-Expected-Entity-Length': '0' }, chunks: [] })).status).toBe(204);
    expect((await onDisk('doc.txt')).length).toBe(0);
    const pp = await finder('PROPPATCH', '/doc.txt', {
      headers: { If: `(<${token}>)` },
      body: '<?xml version="1.0" encoding="utf-8"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><A:appledoubleheader xmlns:A="http://www.apple.com/webdav_fs/props/">AAUWBwACAAA=</A:appledoubleheader></D:prop></D:set></D:propertyupdate>',
    });
    expect([pp.status, pp.body.includes('HTTP/1.1 200 OK')]).toEqual([207, true]);
    expect((await finder('LOCK', '/doc.txt', { headers: { If: `(<${token}>)`, Timeout: 'Second-600' } })).status).toBe(200);
    expect((await finder('UNLOCK', '/doc.txt', { headers: { 'Lock-Token': `<${token}>` } })).status).toBe(204);
    const pf = await finder('PROPFIND', '/doc.txt', { headers: { Depth: '0' }, body: FINDER_PROPS });
    expect(pf.body).toContain('<D:getcontentlength>0</D:getcontentlength>');
    expect(pf.body).toContain('<appledoubleheader xmlns="http://www.apple.com/webdav_fs/props/">AAUWBwACAAA=</appledoubleheader>');
    expect(lockOf((await finder('PROPFIND', '/doc.txt', { headers: { Depth: '0' } })).body)).toBe('');
  });

  it('a chunked PUT of a few MiB is written while it arrives, and stored exactly', async () => {
    expect((await dav('MKCOL', '/big')).status).toBe(201);
    const big = Buffer.alloc(5 << 20);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 12)) & 255;
    const u = new URL(ts.url);
    let sawTemp = false;
    const res = await new Promise<number>((resolve, reject) => {
      const req = request({
        host: u.hostname, port: u.port, method: 'PUT', path: '/dav/big/movie.mov',
        headers: { authorization: AUTH, 'user-agent': UA, 'transfer-encoding': 'chunked', 'x-expected-entity-length': String(big.length) },
      }, (r) => (r.resume(), resolve(r.statusCode ?? 0)));
      req.on('error', reject);
      // The first MiB, then wait until the server is visibly writing (its temp file exists) before the rest.
      req.write(big.subarray(0, 1 << 20), async () => {
        for (let i = 0; i < 250 && !(sawTemp = readdirSync(storageDir('big')).length > 0); i++) await new Promise((r) => setTimeout(r, 20));
        for (let o = 1 << 20; o < big.length; o += 64 << 10) req.write(big.subarray(o, o + (64 << 10)));
        req.end();
      });
    });
    expect(sawTemp).toBe(true);
    expect(res).toBe(201);
    expect((await onDisk('big/movie.mov')).equals(big)).toBe(true);
    expect(readdirSync(storageDir('big'))).toEqual(['movie.mov']);
  });

  it('a chunked PUT cut off mid-body leaves no file, no temp file and no lock; a locked empty file stays as it was', async () => {
    expect((await dav('MKCOL', '/cut')).status).toBe(201);
    const lock = await finder('LOCK', '/cut/locked.bin', { headers: { Depth: '0', Timeout: 'Second-600' }, body: FINDER_LOCK });
    const token = tokenOf(lock.headers['lock-token']);
    const u = new URL(ts.url);
    const cut = (name: string, headers: Record<string, string>) =>
      new Promise<void>((resolve) => {
        const req = request({
          host: u.hostname, port: u.port, method: 'PUT', path: `/dav/cut/${name}`,
          headers: { authorization: AUTH, 'transfer-encoding': 'chunked', 'x-expected-entity-length': String(8 << 20), ...headers },
        });
        req.on('error', () => resolve());
        req.on('close', () => resolve());
        req.write(Buffer.alloc(1 << 20, 1), async () => {
          for (let i = 0; i < 250 && !readdirSync(storageDir('cut')).some((n) => n.startsWith('.')); i++) await new Promise((r) => setTimeout(r, 20));
          req.destroy();
        });
      });
    await cut('new.bin', {});
    await cut('locked.bin', { If: `(<${token}>)` });
    for (let i = 0; i < 250 && readdirSync(storageDir('cut')).length > 1; i++) await new Promise((r) => setTimeout(r, 20));
    expect(readdirSync(storageDir('cut'))).toEqual(['locked.bin']);
    expect((await onDisk('cut/locked.bin')).length).toBe(0);
    expect((await finder('GET', '/cut/new.bin')).status).toBe(404);
    // Finder tries again: the new name takes a lock, the locked one still answers to its token.
    const again = await finder('LOCK', '/cut/new.bin', { headers: { Depth: '0' }, body: FINDER_LOCK });
    expect(again.status).toBe(201);
    expect((await finder('PUT', '/cut/locked.bin', { headers: { If: `(<${token}>)` }, chunks: [Buffer.from('saved')] })).status).toBe(204);
    expect((await finder('UNLOCK', '/cut/locked.bin', { headers: { 'Lock-Token': `<${token}>` } })).status).toBe(204);
    expect((await finder('UNLOCK', '/cut/new.bin', { headers: { 'Lock-Token': `<${tokenOf(again.headers['lock-token'])}>` } })).status).toBe(204);
  });
});

describe('AppleDouble files and renames', () => {
  it('._ files and .DS_Store are stored and listed; a file and its ._ sibling move together; Overwrite: T replaces', async () => {
    expect((await dav('MKCOL', '/ad')).status).toBe(201);
    for (const n of ['a.txt', '._a.txt', '.DS_Store', 'b.txt', '._b.txt']) {
      expect((await finder('PUT', `/ad/${n}`, { headers: { 'X-Expected-Entity-Length': String(n.length) }, chunks: [Buffer.from(n)] })).status).toBe(201);
    }
    const ls = await finder('PROPFIND', '/ad/', { headers: { Depth: '1' }, body: FINDER_PROPS });
    expect(hrefs(ls.body).sort()).toEqual(['/dav/ad/', '/dav/ad/.DS_Store', '/dav/ad/._a.txt', '/dav/ad/._b.txt', '/dav/ad/a.txt', '/dav/ad/b.txt']);
    for (const n of ['a.txt', '._a.txt']) {
      expect((await finder('MOVE', `/ad/${n}`, { headers: { Destination: `${ts.url}/dav/ad/${n.replace('a', 'c')}`, Overwrite: 'F' } })).status).toBe(201);
    }
    for (const n of ['c.txt', '._c.txt']) {
      expect((await finder('MOVE', `/ad/${n}`, { headers: { Destination: `${ts.url}/dav/ad/${n.replace('c', 'b')}`, Overwrite: 'T' } })).status).toBe(204);
    }
    expect([(await onDisk('ad/b.txt')).toString(), (await onDisk('ad/._b.txt')).toString()]).toEqual(['a.txt', '._a.txt']);
    expect(readdirSync(storageDir('ad')).sort()).toEqual(['.DS_Store', '._b.txt', 'b.txt']);
    expect((await finder('DELETE', '/ad/')).status).toBe(204);
  });

  it('a MOVE (or COPY) over a locked file, with its token, keeps the lock on the new file', async () => {
    expect((await dav('MKCOL', '/lk')).status).toBe(201);
    expect((await finder('PUT', '/lk/report.txt', { chunks: [Buffer.from('v1')] })).status).toBe(201);
    const lock = await finder('LOCK', '/lk/report.txt', { headers: { Depth: '0', Timeout: 'Second-600' }, body: FINDER_LOCK });
    const token = tokenOf(lock.headers['lock-token']);
    const ifDst = `<${ts.url}/dav/lk/report.txt> (<${token}>)`;
    // The application's safe save: a temp file renamed over the original.
    expect((await finder('PUT', '/lk/report.sb-1', { chunks: [Buffer.from('v2')] })).status).toBe(201);
    expect((await finder('MOVE', '/lk/report.sb-1', { headers: { Destination: `${ts.url}/dav/lk/report.txt`, Overwrite: 'T' } })).status).toBe(423);
    expect((await finder('MOVE', '/lk/report.sb-1', { headers: { Destination: `${ts.url}/dav/lk/report.txt`, Overwrite: 'T', If: ifDst } })).status).toBe(204);
    expect((await onDisk('lk/report.txt')).toString()).toBe('v2');
    expect(lockOf((await finder('PROPFIND', '/lk/report.txt', { headers: { Depth: '0' } })).body)).toContain(token);
    expect((await finder('PUT', '/lk/report.txt', { chunks: [Buffer.from('intruder')] })).status).toBe(423);
    expect((await finder('PUT', '/lk/report.txt', { headers: { If: `(<${token}>)` }, chunks: [Buffer.from('v3')] })).status).toBe(204);
    expect((await finder('PUT', '/lk/copy.txt', { chunks: [Buffer.from('v4')] })).status).toBe(201);
    expect((await finder('COPY', '/lk/copy.txt', { headers: { Destination: `${ts.url}/dav/lk/report.txt`, Overwrite: 'T', If: ifDst } })).status).toBe(204);
    expect((await finder('LOCK', '/lk/report.txt', { headers: { If: `(<${token}>)`, Timeout: 'Second-600' } })).status).toBe(200);
    expect((await finder('UNLOCK', '/lk/report.txt', { headers: { 'Lock-Token': `<${token}>` } })).status).toBe(204);
    expect((await finder('PUT', '/lk/report.txt', { chunks: [Buffer.from('free')] })).status).toBe(204);
  });
});

describe('decomposed (NFD) names, as macOS sends them', () => {
  it("a name Finder made (NFD) round-trips: PUT, listed href, GET, LOCK with a tagged If, DELETE", async () => {
    const name = nfd('Café résumé.txt');
    expect((await finder('PUT', enc('/' + name), { chunks: [Buffer.from('abc')] })).status).toBe(201);
    const ls = await finder('PROPFIND', '/', { headers: { Depth: '1' }, body: FINDER_PROPS });
    expect(hrefs(ls.body)).toContain('/dav' + enc('/' + name));
    expect((await finder('GET', enc('/' + name))).body).toBe('abc');
    const lock = await finder('LOCK', enc('/' + name), { headers: { Depth: '0' }, body: FINDER_LOCK });
    const token = tokenOf(lock.headers['lock-token']);
    expect((await finder('PUT', enc('/' + name), { headers: { If: `<${ts.url}/dav${enc('/' + name)}> (<${token}>)` }, chunks: [Buffer.from('x')] })).status).toBe(204);
    expect((await finder('UNLOCK', enc('/' + name), { headers: { 'Lock-Token': `<${token}>` } })).status).toBe(204);
    expect((await finder('DELETE', enc('/' + name))).status).toBe(204);
    expect(readdirSync(storageDir()).filter((n) => n.normalize('NFC') === name.normalize('NFC'))).toEqual([]);
  });

  it('names stored composed (NFC, made by Windows or Linux) answer Finder\'s decomposed requests', async () => {
    // Made by another client: a folder and a file named in NFC.
    expect((await dav('MKCOL', enc('/Été'))).status).toBe(201);
    expect((await dav('PUT', enc('/Été/Noël.txt'), { body: 'gifts' })).status).toBe(201);
    expect((await dav('PUT', enc('/Été/a'), { body: 'a' })).status).toBe(201);
    const folder = enc(nfd('/Été'));
    const file = enc(nfd('/Été/Noël.txt'));

    expect((await finder('GET', file)).body).toBe('gifts');
    // The listing Finder asks for: its own href comes back as sent, so WebDAVFS (which tells the
    // folder's own response from its members' by the decoded length) keeps the short name `a`.
    const ls = await finder('PROPFIND', folder + '/', { headers: { Depth: '1' }, body: FINDER_PROPS });
    expect(ls.status).toBe(207);
    const listed = hrefs(ls.body).map(decodeURIComponent);
    expect(listed[0]).toBe(nfd('/dav/Été/'));
    expect(listed.slice(1).sort()).toEqual([nfd('/dav/Été/') + 'Noël.txt', nfd('/dav/Été/') + 'a']);
    for (const h of listed.slice(1)) expect(h.length).toBeGreaterThan(listed[0]!.length);

    // Saving over it (LOCK, PUT, UNLOCK) replaces that file instead of adding a look-alike next to it.
    const lock = await finder('LOCK', file, { headers: { Depth: '0', Timeout: 'Second-600' }, body: FINDER_LOCK });
    expect(lock.status).toBe(200);
    const token = tokenOf(lock.headers['lock-token']);
    expect((await finder('PUT', file, { headers: { If: `(<${token}>)` }, chunks: [Buffer.from('more gifts')] })).status).toBe(204);
    expect((await finder('PUT', file, { headers: { If: `<${ts.url}/dav${file}> (<${token}>)` }, chunks: [Buffer.from('even more')] })).status).toBe(204);
    expect((await finder('UNLOCK', file, { headers: { 'Lock-Token': `<${token}>` } })).status).toBe(204);
    expect(readdirSync(storageDir('Été')).sort()).toEqual(['Noël.txt', 'a']);
    expect((await onDisk('Été/Noël.txt')).toString()).toBe('even more');

    // A new file in that folder keeps the name Finder gave it; renames land in the existing folder.
    expect((await finder('PUT', enc(nfd('/Été/._Noël.txt')), { chunks: [Buffer.from('ad')] })).status).toBe(201);
    expect((await finder('MOVE', file, { headers: { Destination: `${ts.url}/dav${enc(nfd('/Été/Noël 2.txt'))}`, Overwrite: 'T' } })).status).toBe(201);
    expect(readdirSync(storageDir('Été')).sort()).toEqual([nfd('._Noël.txt'), nfd('Noël 2.txt'), 'a'].sort());
    expect((await finder('DELETE', folder + '/')).status).toBe(204);
    expect(readdirSync(storageDir()).filter((n) => n.normalize('NFC') === 'Été')).toEqual([]);
  });
});

describe('keep-alive', () => {
  it('one connection carries a long run of Finder requests', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<unknown>();
    agent.on('free', (s) => sockets.add(s));
    try {
      expect((await finder('MKCOL', '/ka', { agent })).status).toBe(201);
      for (let i = 0; i < 25; i++) {
        const p = `/ka/f${i}.txt`;
        const lock = await finder('LOCK', p, { headers: { Depth: '0', Timeout: 'Second-600' }, body: FINDER_LOCK, agent });
        expect(lock.status).toBe(201);
        const token = tokenOf(lock.headers['lock-token']);
        expect((await finder('PUT', p, { headers: { If: `(<${token}>)`, 'X-Expected-Entity-Length': String(i) }, chunks: [Buffer.alloc(i, 97)], agent })).status).toBe(204);
        expect((await finder('PROPFIND', `/ka/._f${i}.txt`, { headers: { Depth: '0' }, body: FINDER_PROPS, agent })).status).toBe(404);
        expect((await finder('UNLOCK', p, { headers: { 'Lock-Token': `<${token}>` }, agent })).status).toBe(204);
        expect((await finder('GET', p, { agent })).body).toBe('a'.repeat(i));
      }
      expect((await finder('PROPFIND', '/ka/', { headers: { Depth: '1' }, body: FINDER_PROPS, agent })).body.match(/<D:response>/g)?.length).toBe(26);
      expect(sockets.size).toBe(1);
    } finally {
      agent.destroy();
    }
  });
});
