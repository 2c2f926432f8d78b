/**
 * Code-review findings on error mapping, each proven against the real server on loopback: an Alias
 * merging a remote that is down answered a listing without the remote's files (a sync client then
 * deletes its copies); an FTP server's refusals of an upload (553) and of a new mtime (550) came out
 * as "invalid request" and "No such file" instead of permission denied; a WebDAV server's 423 (a
 * lock) on an upload's final MOVE came out as "file exists", and its 405 on MKCOL (a read-only
 * folder) as "object not found"; and an SFTP READ of a remote file whose server went away mid-body
 * answered "internal error" (and was logged as a bug of ours) instead of a backend failure.
 */
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { statusCode, withSsh2Sftp } from './clients/sftp.js';
import { createStorage, startRemoteServers, type RemoteServers } from './remote-servers.js';

const STATUS = ssh2.utils.sftp.STATUS_CODE;
const basic = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

let s: TestServer;
let token: string;
let remote: RemoteServers<'FTP'>;
let work: string;

beforeAll(async () => {
  remote = await startRemoteServers(['FTP'] as const);
  // Owned by root, mode 755: the FTP account (vsftpd's own user) may read it but not write in it.
  await mkdir(join(remote.ftpd.dataDir, 'ro'), { mode: 0o755 });
  await writeFile(join(remote.ftpd.dataDir, 'ro', 'f.txt'), 'kept');
  s = await startTestServer();
  token = await s.login();
  ok(await createStorage(s, token, '/ftp', 'FTP', remote.additionOf('FTP')));
  work = join(s.dataDir, 'emr-a');
  await mkdir(work);
  await writeFile(join(work, 'onA.txt'), 'a');
}, 60_000);

afterAll(async () => {
  await s?.close();
  await remote?.stop();
});

describe('an Alias merging a local folder and a remote that went down', () => {
  let b: TestServer | undefined;
  beforeAll(async () => {
    b = await startRestServer();
    ok(await putFile(b, await b.login(), '/onB.txt', 'b'));
    ok(await createStorage(s, token, '/emr-a', 'Local', { root_folder_path: work }));
    ok(await createStorage(s, token, '/emr-wd', 'WebDav', { address: `${b.url}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/' }));
    ok(await s.api('/api/admin/storage/create', { token, body: { mount_path: '/emr-al', driver: 'Alias', addition: JSON.stringify({ paths: 'm:/emr-a\nm:/emr-wd' }) } }));
    const before = await s.api<{ content: Array<{ name: string }> }>('/api/fs/list', { token, body: { path: '/emr-al', refresh: true } });
    expect(before.data?.content.map((e) => e.name).sort()).toEqual(['onA.txt', 'onB.txt']);
    await b.close();
  }, 60_000);
  afterAll(async () => { await b?.close(); });

  it('fails the listing on every protocol instead of answering it without the remote\'s files', async () => {
    const r = await s.api('/api/fs/list', { token, body: { path: '/emr-al', refresh: true } });
    expect(r).toMatchObject({ code: 500, data: null });
    const dav = await fetch(`${s.url}/dav/emr-al/`, { method: 'PROPFIND', headers: { authorization: basic, depth: '1' } });
    await dav.arrayBuffer();
    expect(dav.status).toBe(502);
    const code = await withSsh2Sftp({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, (sftp) =>
      new Promise<number | undefined>((res) => sftp.opendir('/emr-al', (e, h) => (e ? res((e as { code?: number }).code) : sftp.readdir(h, (e2) => res(e2 ? (e2 as { code?: number }).code : undefined))))));
    expect(code).toBe(STATUS.FAILURE);
  });
});

describe('an FTP folder the FTP account may not write to', () => {
  it('an upload answers permission denied (REST 403, WebDAV 403, SFTP PERMISSION_DENIED), not invalid request', async () => {
    expect(await putFile(s, token, '/ftp/ro/up.txt', 'hello')).toMatchObject({ code: 403 });
    const dav = await fetch(`${s.url}/dav/ftp/ro/up.txt`, { method: 'PUT', body: 'hello', headers: { authorization: basic } });
    await dav.arrayBuffer();
    expect(dav.status).toBe(403);
    const code = await withSsh2Sftp({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, (sftp) =>
      new Promise<number | undefined>((res) => sftp.open('/ftp/ro/s.txt', 'w', (e, h) => (e ? res((e as { code?: number }).code)
        : sftp.write(h, Buffer.from('abc'), 0, 3, 0, (e2) => (e2 ? res((e2 as { code?: number }).code) : sftp.close(h, (e3) => res(e3 ? (e3 as { code?: number }).code : undefined))))))));
    expect(code).toBe(STATUS.PERMISSION_DENIED);
    expect(await readdir(join(remote.ftpd.dataDir, 'ro'))).toEqual(['f.txt']);
  });

  it('SFTP SETSTAT of an mtime the server refuses answers PERMISSION_DENIED, not NO_SUCH_FILE for a file that is there', async () => {
    const code = await withSsh2Sftp({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, (sftp) =>
      statusCode((cb) => sftp.setstat('/ftp/ro/f.txt', { mtime: 1000, atime: 1000 }, cb)));
    expect(code).toBe(STATUS.PERMISSION_DENIED);
  });
});

describe('a WebDav storage on a server that refuses (a lock held there, a read-only folder)', () => {
  let b: TestServer | undefined;
  const LOCKINFO = '<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope>' +
    '<D:locktype><D:write/></D:locktype><D:owner>someone else</D:owner></D:lockinfo>';
  beforeAll(async () => {
    b = await startRestServer();
    const bt = await b.login();
    ok(await putFile(b, bt, '/f.txt', 'old'));
    ok(await putFile(b, bt, '/sub/x.txt', 'x'));
    // A read-only Alias: its /dav answers MKCOL and PUT with 405.
    ok(await b.api('/api/admin/storage/create', { token: bt, body: { mount_path: '/ro', driver: 'Alias', addition: JSON.stringify({ paths: '/sub' }) } }));
    ok(await createStorage(s, token, '/emr-lk', 'WebDav', { address: `${b.url}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/' }));
    const lock = await fetch(`${b.url}/dav/f.txt`, { method: 'LOCK', headers: { authorization: basic, 'content-type': 'application/xml', timeout: 'Second-3600' }, body: LOCKINFO });
    await lock.arrayBuffer();
    expect(lock.status).toBe(200);
  }, 60_000);
  afterAll(async () => { await b?.close(); });

  it('replacing a file locked there answers 423 Locked (REST and WebDAV), not "file exists", and leaves it as it was', async () => {
    expect(await putFile(s, token, '/emr-lk/f.txt', 'new')).toMatchObject({ code: 423 });
    const dav = await fetch(`${s.url}/dav/emr-lk/f.txt`, { method: 'PUT', body: 'new', headers: { authorization: basic } });
    await dav.arrayBuffer();
    expect(dav.status).toBe(423);
    expect(await (await fetch(`${b!.url}/dav/f.txt`, { headers: { authorization: basic } })).text()).toBe('old');
  });

  it('a folder made where the server refuses MKCOL answers that it is not supported, not "object not found" or "file exists"', async () => {
    const r = await s.api('/api/fs/mkdir', { token, body: { path: '/emr-lk/ro/newdir' } });
    expect(r.code).toBe(500);
    expect(r.message).toMatch(/not allowed by the server/);
    const code = await withSsh2Sftp({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, (sftp) =>
      statusCode((cb) => sftp.mkdir('/emr-lk/ro/newdir2', cb)));
    expect(code).toBe(STATUS.OP_UNSUPPORTED);
  });
});

describe('a WebDav storage whose server goes away in the middle of a download', () => {
  const SIZE = 1 << 20;
  let fake: http.Server | undefined;
  beforeAll(async () => {
    // Just enough WebDAV: one file, whose GET sends 40 KB of its 1 MiB and then drops the connection.
    const entry = (href: string, dir: boolean) => `<D:response><D:href>${href}</D:href><D:propstat><D:prop>` +
      (dir ? '<D:resourcetype><D:collection/></D:resourcetype>' : `<D:resourcetype/><D:getcontentlength>${SIZE}</D:getcontentlength>`) +
      '<D:getlastmodified>Mon, 01 Jan 2024 00:00:00 GMT</D:getlastmodified></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>';
    fake = http.createServer((req, res) => {
      req.resume();
      const p = new URL(req.url ?? '/', 'http://x').pathname;
      if (req.method === 'PROPFIND' && (p === '/' || p === '/big.bin')) {
        const inner = p === '/' ? entry('/', true) + (req.headers.depth === '1' ? entry('/big.bin', false) : '') : entry('/big.bin', false);
        res.writeHead(207, { 'content-type': 'application/xml' });
        return void res.end(`<?xml version="1.0"?><D:multistatus xmlns:D="DAV:">${inner}</D:multistatus>`);
      }
      if (req.method === 'GET' && p === '/big.bin') {
        res.writeHead(200, { 'content-length': String(SIZE) });
        res.write(Buffer.alloc(40_000));
        return void setTimeout(() => res.socket?.destroy(), 50);
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => fake!.listen(0, '127.0.0.1', r));
    const port = (fake.address() as AddressInfo).port;
    ok(await createStorage(s, token, '/emr-cut', 'WebDav', { address: `http://127.0.0.1:${port}`, username: 'u', password: 'p', root_folder_path: '/' }));
  });
  afterAll(() => { fake?.closeAllConnections(); fake?.close(); });

  it('SFTP READ answers FAILURE "storage backend error", not "internal error"', async () => {
    const failed = await withSsh2Sftp({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, (sftp) =>
      new Promise<{ code?: number; message: string } | undefined>((res) => sftp.open('/emr-cut/big.bin', 'r', (e, h) => {
        if (e) return res(e as { code?: number; message: string });
        const buf = Buffer.alloc(32768);
        let pos = 0;
        const next = (): void => sftp.read(h, buf, 0, buf.length, pos, (e2, n) => {
          if (e2) return res(e2 as { code?: number; message: string });
          if (!n || pos > SIZE) return res(undefined);
          pos += n;
          next();
        });
        next();
      })));
    expect(failed).toMatchObject({ code: STATUS.FAILURE, message: 'storage backend error' });
  });
});
