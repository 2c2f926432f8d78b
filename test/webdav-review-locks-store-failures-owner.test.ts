/**
 * WebDAV locks, second review pass (RFC 4918 §6-7, 9.10, 10.4): defects found by reading the lock
 * manager and the If header code, each proven here against a real server first.
 */
import { execFile } from 'node:child_process';
import { rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, davRequest, type DavClient } from './clients/webdav.js';
import { ALL_FS, makeUser, PERM } from './fs-helpers.js';
import { cliEnv, startServerProcess, tempDataDirs, type ServerProcess } from './clients/process.js';

const PASSWORD = 'locks2-Password1';
const LOCK_BODY =
  '<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope>' +
  '<D:locktype><D:write/></D:locktype><D:owner>locks2</D:owner></D:lockinfo>';
const tokenOf = (h: unknown) => String(h).replace(/^<|>$/g, '');
const dirs = tempDataDirs('tg-locks2-');
const procs: ServerProcess[] = [];

afterAll(async () => {
  for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  await dirs.cleanup();
});

describe('a lock change the store could not save', () => {
  it('grants no lock and leaves no empty file when LOCK fails; a failed refresh or UNLOCK changes nothing', async () => {
    const data = await dirs.next();
    const p = await startServerProcess(['--data', data], cliEnv({ TREEGATE_ADMIN_PASSWORD: PASSWORD, TREEGATE_SFTP_ENABLE: 'false' }));
    procs.push(p);
    const base = `http://127.0.0.1:${p.http}`;
    const dav = (method: string, path: string, opts: { headers?: Record<string, string>; body?: string } = {}) =>
      davRequest(base, method, `/dav${path}`, { ...opts, user: 'admin', password: PASSWORD });
    const fsize = (limit: string) => promisify(execFile)('prlimit', ['--pid', String(p.child.pid), `--fsize=${limit}`]);
    expect((await dav('PUT', '/f.txt', { body: 'f' })).status).toBe(201);
    // One lock and unlock first, so kv.jsonl exists.
    const first = tokenOf((await dav('LOCK', '/f.txt', { body: LOCK_BODY })).headers['lock-token']);
    expect((await dav('UNLOCK', '/f.txt', { headers: { 'Lock-Token': `<${first}>` } })).status).toBe(204);
    // The disk fills up: the next journal line does not fit (a lock line is some 300 bytes).
    const full = async <T>(fn: () => Promise<T>): Promise<T> => {
      await fsize(`${(await stat(join(data, 'kv.jsonl'))).size + 50}:unlimited`);
      try {
        return await fn();
      } finally {
        await fsize('unlimited:unlimited');
      }
    };
    // EFBIG here: 500 (a full disk's ENOSPC is 507).
    expect((await full(() => dav('LOCK', '/f.txt', { body: LOCK_BODY }))).status).toBeGreaterThanOrEqual(500);
    // The client got no token: the file must not stay locked by one nobody holds.
    expect((await dav('PUT', '/f.txt', { body: 'g' })).status).toBe(204);
    expect((await dav('PROPFIND', '/f.txt', { headers: { Depth: '0' } })).body).toContain('<D:lockdiscovery/>');
    // A LOCK of a new name that failed so leaves no empty file behind.
    expect((await full(() => dav('LOCK', '/new.txt', { body: LOCK_BODY }))).status).toBeGreaterThanOrEqual(500);
    expect((await dav('GET', '/new.txt')).status).toBe(404);

    const t = tokenOf((await dav('LOCK', '/f.txt', { body: LOCK_BODY, headers: { Timeout: 'Second-600' } })).headers['lock-token']);
    // A refresh that could not be saved does not extend the lock (PROPFIND still tells the old timeout).
    const refresh = await full(() => dav('LOCK', '/f.txt', { headers: { If: `(<${t}>)`, Timeout: 'Second-80000' } }));
    expect(refresh.status).toBeGreaterThanOrEqual(500);
    const timeout = /<D:timeout>Second-(\d+)</.exec((await dav('PROPFIND', '/f.txt', { headers: { Depth: '0' } })).body)?.[1];
    expect(Number(timeout)).toBeLessThanOrEqual(600);
    // An UNLOCK that could not be saved leaves the lock held (it would come back at the next start),
    // so the client's retry succeeds instead of answering 409.
    expect((await full(() => dav('UNLOCK', '/f.txt', { headers: { 'Lock-Token': `<${t}>` } }))).status).toBeGreaterThanOrEqual(500);
    expect((await dav('PUT', '/f.txt', { body: 'h' })).status).toBe(423);
    expect((await dav('UNLOCK', '/f.txt', { headers: { 'Lock-Token': `<${t}>` } })).status).toBe(204);
    expect((await dav('PUT', '/f.txt', { body: 'i' })).status).toBe(204);
  }, 60_000);
});

describe('locks loaded at the first WebDAV request', () => {
  it('a lock that expired while the server was down does not stop WebDAV when the store cannot write', async () => {
    const data = await dirs.next();
    const env = cliEnv({ TREEGATE_ADMIN_PASSWORD: PASSWORD, TREEGATE_SFTP_ENABLE: 'false' });
    const start = async () => {
      const p = await startServerProcess(['--data', data], env);
      procs.push(p);
      const dav = (method: string, path: string, opts: { headers?: Record<string, string>; body?: string } = {}) =>
        davRequest(`http://127.0.0.1:${p.http}`, method, `/dav${path}`, { ...opts, user: 'admin', password: PASSWORD });
      return { p, dav };
    };
    const one = await start();
    expect((await one.dav('PUT', '/e.txt', { body: 'e' })).status).toBe(201);
    expect((await one.dav('LOCK', '/e.txt', { body: LOCK_BODY, headers: { Timeout: 'Second-1' } })).status).toBe(200);
    one.p.child.kill('SIGTERM');
    await one.p.exited;
    await new Promise((r) => setTimeout(r, 1500)); // the lock runs out meanwhile
    const two = await start();
    // The disk is full when the first WebDAV request loads the locks (and would drop the expired one).
    const fsize = (limit: string) => promisify(execFile)('prlimit', ['--pid', String(two.p.child.pid), `--fsize=${limit}`]);
    await fsize(`${(await stat(join(data, 'kv.jsonl'))).size}:unlimited`);
    const during = await two.dav('GET', '/e.txt');
    await fsize('unlimited:unlimited');
    // Reading needs no write: it is served; and once there is room again, so is everything else.
    expect(during.status).toBe(200);
    expect((await two.dav('PUT', '/e.txt', { body: 'f' })).status).toBe(204);
  }, 60_000);
});

describe('locks and the users holding them', () => {
  let ts: TestServer;
  let dav: DavClient;
  let bob: DavClient;
  beforeAll(async () => {
    ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
    dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
    await makeUser(ts, await ts.login(), 'bob', PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE | ALL_FS);
    bob = davClient(ts.url, 'bob', 'pw-bob-123');
  });
  afterAll(async () => {
    await ts?.close();
  });

  it('a token sent by another user than the owner is refused with 403 (as Apache mod_dav), 423 only when no token was sent', async () => {
    expect((await dav('MKCOL', '/fd')).status).toBe(201);
    expect((await dav('PUT', '/fd/f.txt', { body: 'f' })).status).toBe(201);
    const t = tokenOf((await dav('LOCK', '/fd/', { body: LOCK_BODY })).headers['lock-token']);
    const If = `(<${t}>)`;
    expect((await bob('PUT', '/fd/f.txt', { body: 'b' })).status).toBe(423);
    expect((await bob('PUT', '/fd/f.txt', { body: 'b', headers: { If } })).status).toBe(403);
    expect((await bob('PUT', '/fd/new.txt', { body: 'b', headers: { If } })).status).toBe(403);
    expect((await bob('DELETE', '/fd/f.txt', { headers: { If } })).status).toBe(403);
    expect((await bob('MOVE', '/fd/f.txt', { headers: { If, Destination: '/dav/g.txt' } })).status).toBe(403);
    expect((await bob('LOCK', '/fd/', { headers: { If, Timeout: 'Second-60' } })).status).toBe(403);
    expect((await bob('UNLOCK', '/fd/', { headers: { 'Lock-Token': `<${t}>` } })).status).toBe(403);
    // The owner, with the same header, may.
    expect((await dav('PUT', '/fd/f.txt', { body: 'a', headers: { If } })).status).toBe(204);
    expect((await dav('UNLOCK', '/fd/', { headers: { 'Lock-Token': `<${t}>` } })).status).toBe(204);
  });

  it('the holder releases a lock after its file was deleted on the storage itself (not through treegate)', async () => {
    expect((await dav('PUT', '/gone.txt', { body: 'g' })).status).toBe(201);
    const t = tokenOf((await dav('LOCK', '/gone.txt', { body: LOCK_BODY })).headers['lock-token']);
    await rm(join(ts.dataDir, 'storage', 'gone.txt')); // the root storage's folder (bootstrap.ts)
    expect((await bob('PUT', '/gone.txt', { body: 'b' })).status).toBe(423); // the lock still holds the name
    // Not another user's to release, and the lock must exist.
    expect((await bob('UNLOCK', '/gone.txt', { headers: { 'Lock-Token': `<${t}>` } })).status).toBe(404);
    expect((await dav('UNLOCK', '/gone.txt', { headers: { 'Lock-Token': '<opaquelocktoken:none>' } })).status).toBe(404);
    expect((await dav('UNLOCK', '/gone.txt', { headers: { 'Lock-Token': `<${t}>` } })).status).toBe(204);
    expect((await bob('PUT', '/gone.txt', { body: 'b' })).status).toBe(201);
  });
});
