/**
 * Code-review probe of the FTP driver (second pass), through the whole server against a real
 * vsftpd on loopback.
 */
import { existsSync } from 'node:fs';
import { chmod, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { createStorage, startRemoteServers, type RemoteServers } from './remote-servers.js';

let ts: TestServer;
let admin: string;
let remote: RemoteServers<'FTP'>;
const davAuth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
const dav = (path: string, init: RequestInit = {}) =>
  fetch(`${ts.url}/dav${path.split('/').map(encodeURIComponent).join('/')}`, { ...init, headers: { authorization: davAuth, ...(init.headers as Record<string, string>) } });

beforeAll(async () => {
  remote = await startRemoteServers(['FTP'] as const);
  ts = await startRestServer();
  admin = await ts.login();
  ok(await createStorage(ts, admin, '/ftp', 'FTP', remote.additionOf('FTP')));
}, 60_000);

afterAll(async () => {
  await ts?.close();
  await remote?.stop();
});

const fsGet = (path: string) => ts.api<{ name: string; size: number; is_dir: boolean }>('/api/fs/get', { token: admin, body: { path } });

describe('FTP: a name FTP commands cannot carry', () => {
  it('a lookup of a path with a line break is not found (404), not an upstream failure', async () => {
    ok(await putFile(ts, admin, '/ftp/crlf/a.txt', 'hello'));
    for (const p of ['/ftp/crlf/a\nb', '/ftp/crlf/x\r\nDELE a.txt/y']) {
      const r = await fsGet(p);
      expect({ p, code: r.code, message: r.message }).toMatchObject({ p, code: 500 });
      expect(r.message).toMatch(/not found/);
      const s = await dav(p, { method: 'PROPFIND', headers: { depth: '0' } });
      expect({ p, status: s.status }).toEqual({ p, status: 404 });
    }
    ok(await fsGet('/ftp/crlf/a.txt'));
  });
});

describe('FTP: a folder name with a double quote (PWD doubles it)', () => {
  it('removing the folder removes it, not only what it holds', async () => {
    ok(await putFile(ts, admin, '/ftp/rmq/say "hi"/inner.txt', 'x'));
    ok(await putFile(ts, admin, '/ftp/rmq/say "hi"/sub/deep.txt', 'y'));
    ok(await ts.api('/api/fs/remove', { token: admin, body: { dir: '/ftp/rmq', names: ['say "hi"'] } }));
    expect(existsSync(join(remote.ftpd.dataDir, 'rmq', 'say "hi"'))).toBe(false);
    expect((await dav('/ftp/rmq/a"b', { method: 'MKCOL' })).status).toBe(201);
    expect((await dav('/ftp/rmq/a"b', { method: 'DELETE' })).status).toBe(204);
    expect(existsSync(join(remote.ftpd.dataDir, 'rmq', 'a"b'))).toBe(false);
  });
});

describe('FTP: a file the FTP account may not read', () => {
  it('a download is refused (403) before any answer, not a 200 whose connection is cut', async () => {
    const f = join(remote.ftpd.dataDir, 'noread.txt');
    await writeFile(f, 'secret bytes');
    await chmod(f, 0o000);
    for (const range of [undefined, 'bytes=2-']) {
      const d = await dav('/ftp/noread.txt', { headers: range ? { range } : {} });
      expect({ range, status: d.status }).toEqual({ range, status: 403 });
    }
    // A readable file, whole, in part, and empty, still downloads.
    ok(await putFile(ts, admin, '/ftp/read/ok.txt', 'hello world'));
    ok(await putFile(ts, admin, '/ftp/read/empty.txt', ''));
    expect(await (await dav('/ftp/read/ok.txt')).text()).toBe('hello world');
    const part = await dav('/ftp/read/ok.txt', { headers: { range: 'bytes=6-' } });
    expect({ status: part.status, body: await part.text() }).toEqual({ status: 206, body: 'world' });
    const empty = await dav('/ftp/read/empty.txt');
    expect({ status: empty.status, body: await empty.text() }).toEqual({ status: 200, body: '' });
  });
});

describe('FTP: a username or password with a line break', () => {
  it('fails the storage clearly and at once, without crashing the server or showing the password', async () => {
    const crashes: unknown[] = [];
    const onCrash = (e: unknown) => crashes.push(e);
    process.on('uncaughtException', onCrash);
    try {
      for (const [i, bad] of [{ password: 'sec\nret-pw' }, { username: 'tgftp\r\nPASS x' }].entries()) {
        const r = await createStorage(ts, admin, `/ftpbad${i}`, 'FTP', { ...remote.additionOf('FTP'), ...bad });
        expect(r.message).toMatch(/line break/);
        expect(r.message).not.toMatch(/ret-pw|PASS/);
      }
      await new Promise((r) => setTimeout(r, 200)); // a late throw from the socket's data handler
      expect(crashes.map(String)).toEqual([]);
    } finally {
      process.off('uncaughtException', onCrash);
    }
  });
});
