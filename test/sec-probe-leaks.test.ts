/**
 * Information-leak probe: what a non-admin (a user with a base path, the guest, an anonymous /d
 * link) reads in error messages and task lists on REST, WebDAV and SFTP, and what the log keeps of
 * logins, tokens, signs and the secrets of storages and download tools. A storage's host root, a
 * remote's address and user, another user's folders and JS error text are the admin's to see (in
 * the admin API and the log), never a user's; no log line holds a secret.
 */
import { mkdir as hostMkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VfsError } from '../src/errors.js';
import { signWith } from '../src/sign.js';
import type { TaskInfo } from '../src/tasks/types.js';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { expectLogsFree } from './auth-helpers.js';
import { ALL_FS, expectCode, list, makeUser, ok, PERM, putFile, rawRequest } from './fs-helpers.js';
import { createStorage, startRemoteServers, type RemoteServers } from './remote-servers.js';
import { davRequest } from './clients/webdav.js';
import { withSsh2Sftp } from './clients/sftp.js';
import { freePort } from './clients/process.js';
import { settle } from './tasks-helpers.js';

const USER_PW = 'pw-u-123';
const GUEST_BASE = '/home/u';
/** Secrets that go into requests below: none may reach a log line. */
const SECRETS = [
  ADMIN_PASSWORD, USER_PW, 'WRONG-sftp-storage-pass', 'wrong-user-password', 'RPC-URI-PASS', 'ARIA2-RPC-SECRET', 'QBIT-URL-PASS',
  'WRONG-dav-storage-pass',
];

let ts: TestServer;
let remote: RemoteServers<'SFTP' | 'WebDav'>;
let admin: string;
let user: string;
/** The Local storage's host root (mounted at /home) and a root that does not exist (at /home/u/gone). */
let host: string;
let missingRoot: string;

beforeAll(async () => {
  remote = await startRemoteServers(['SFTP', 'WebDav']);
  ts = await startTestServer();
  admin = await ts.login();
  SECRETS.push(admin, remote.dav.password, remote.sshd.privateKey.split('\n')[1]!);
  host = await mkdtemp(join(tmpdir(), 'treegate-leak-host-'));
  missingRoot = join(host, 'not-here');
  await hostMkdir(join(host, 'u'));
  await hostMkdir(join(host, 'other-user-secret-folder'));
  await writeFile(join(host, 'u', 'f.txt'), 'hello');
  ok(await createStorage(ts, admin, '/home', 'Local', { root_folder_path: host }));
  await createStorage(ts, admin, '/home/u/gone', 'Local', { root_folder_path: missingRoot });
  await createStorage(ts, admin, '/home/u/badsftp', 'SFTP', { ...remote.additionOf('SFTP'), private_key: '', password: 'WRONG-sftp-storage-pass' });
  await createStorage(ts, admin, '/home/u/baddav', 'WebDav', { ...remote.additionOf('WebDav'), password: 'WRONG-dav-storage-pass' });
  ok(await createStorage(ts, admin, '/home/u/mem', 'Memory', {}));
  const perm = ALL_FS | PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE | PERM.SFTP_READ | PERM.SFTP_MANAGE | 4 /* offline download */;
  user = await makeUser(ts, admin, 'u', perm, '/home/u');
  SECRETS.push(user);
}, 60_000);

afterAll(async () => {
  if (ts) {
    expectLogsFree(ts, SECRETS);
    await ts.close();
  }
  await remote?.stop();
  if (host) await rm(host, { recursive: true, force: true });
});

/** `text` holds none of the host paths, remote addresses or remote users a non-admin must not read. */
function expectNoDetail(text: string): void {
  for (const bad of [host, tmpdir() + '/', `127.0.0.1:${remote.sshd.port}`, `127.0.0.1:${remote.dav.port}`, `user ${remote.sshd.user}`, 'RPC-URI-PASS', '/home/u', 'other-user']) {
    expect(text, `leaks ${bad}`).not.toContain(bad);
  }
}

describe('a broken storage, seen by a user, the guest and a /d link', () => {
  it('REST answers users the plain message; the admin still reads the detail', async () => {
    for (const path of ['/gone', '/gone/f.txt', '/badsftp', '/baddav']) {
      const r = await list(ts, user, path);
      expectCode(r, 500, 'storage not available');
      expectNoDetail(JSON.stringify(r));
      expectCode(await ts.api('/api/fs/get', { token: user, body: { path } }), 500, 'storage not available');
    }
    expectCode(await ts.api('/api/fs/mkdir', { token: user, body: { path: '/badsftp/x' } }), 500, 'storage not available');
    expectCode(await putFile(ts, user, '/gone/new.txt', 'x'), 500, 'storage not available');
    // The admin is told what is wrong (alist-compat: the storage's status).
    expectCode(await list(ts, admin, '/home/u/gone'), 500, `storage not init: root folder ${missingRoot} not exists`);
    expect((await list(ts, admin, '/home/u/badsftp')).message).toBe(
      `storage not init: sftp: authentication failed for user ${remote.sshd.user} at 127.0.0.1:${remote.sshd.port}`,
    );
  });

  it('the guest and an anonymous /d link get the plain message too', async () => {
    const users = await ts.api<{ content: Array<{ id: number; username: string }> }>('/api/admin/user/list', { token: admin });
    const guestId = users.data!.content.find((u) => u.username === 'guest')!.id;
    ok(await ts.api('/api/admin/user/update', { token: admin, body: { id: guestId, username: 'guest', role: 1, disabled: false, permission: 0, base_path: GUEST_BASE } }));
    try {
      const r = await list(ts, '', '/gone');
      expectCode(r, 500, 'storage not available');
      // A valid sign: the link passes its checks and reaches the broken storage.
      const sign = signWith(ts.running.core.settings.get('token'), '/home/u/badsftp/f.txt', 0);
      const d = await rawRequest(ts, 'GET', `/d/home/u/badsftp/f.txt?sign=${encodeURIComponent(sign)}`);
      expect(JSON.parse(d.body.toString())).toEqual({ code: 500, message: 'storage not available', data: null });
    } finally {
      ok(await ts.api('/api/admin/user/update', { token: admin, body: { id: guestId, username: 'guest', role: 1, disabled: true, permission: 0, base_path: '/' } }));
    }
  });

  it('WebDAV and SFTP answer statuses and fixed texts, never the detail', async () => {
    for (const path of ['/gone', '/badsftp']) {
      const r = await davRequest(ts.url, 'PROPFIND', '/dav' + path, { user: 'u', password: USER_PW, headers: { depth: '1' } });
      expect({ status: r.status, body: r.body }).toEqual({ status: 502, body: '502 Bad Gateway' });
    }
    await withSsh2Sftp({ port: ts.sftpPort, username: 'u', password: USER_PW }, async (sftp) => {
      const opendir = (p: string) => new Promise<unknown>((r) => sftp.opendir(p, (e) => r(e && { code: (e as { code?: number }).code, message: e.message })));
      expect(await opendir('/gone')).toEqual({ code: 4, message: 'storage not available' });
      expect(await opendir('/badsftp')).toEqual({ code: 4, message: 'storage not available' });
      expect(await opendir('/' + 'n'.repeat(300))).toEqual({ code: 4, message: 'file name too long' });
    });
  });

  it('host file errors answer in the user\'s terms on every protocol', async () => {
    const long = '/' + 'n'.repeat(300);
    expectCode(await list(ts, user, long), 400, 'file name too long');
    expectCode(await putFile(ts, user, long, 'x'), 400, 'file name too long');
    expectCode(await list(ts, user, '/f.txt/x'), 500, 'not a folder');
    expectCode(await ts.api('/api/fs/mkdir', { token: user, body: { path: '/f.txt/sub' } }), 500, 'not a folder');
    expectCode(await list(ts, user, '/nope'), 500, 'object not found');
    const dav = await davRequest(ts.url, 'PUT', '/dav' + long, { user: 'u', password: USER_PW, body: 'x' });
    expect({ status: dav.status, body: dav.body }).toEqual({ status: 400, body: '400 Bad Request' });
  });
});

describe('tasks, as their creator sees them', () => {
  it('names a copy\'s ends relative to the user\'s base path', async () => {
    const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/copy', { token: user, body: { src_dir: '/', dst_dir: '/mem', names: ['f.txt'] } });
    ok(r);
    expect(r.data!.tasks.map((t) => t.name)).toEqual(['copy [/](/f.txt) to [/mem](/)']);
    const done = await settle(ts, user, 'copy');
    expect(done.map((t) => [t.name, t.state, t.error])).toContainEqual(['copy [/](/f.txt) to [/mem](/)', 2, '']);
  });

  it('shows a failed copy\'s backend detail and JS faults to the admin\'s log only', async () => {
    const vfs = ts.running.core.vfs;
    const put = vfs.put.bind(vfs);
    const detail = `sftp: cannot connect to 127.0.0.1:${remote.sshd.port}: ECONNREFUSED`;
    let fault: Error = new VfsError('UPSTREAM', detail);
    vfs.put = async (ctx, path, ...rest) => {
      if (path.startsWith('/mem/')) throw fault;
      return put(ctx, path, ...rest);
    };
    try {
      const failed = async (name: string) => {
        await writeFile(join(host, 'u', name), 'x');
        const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/copy', { token: user, body: { src_dir: '/', dst_dir: '/mem', names: [name] } });
        ok(r);
        const id = r.data!.tasks[0]!.id;
        for (let i = 0; i < 100; i++) {
          const t = (await ts.api<TaskInfo>(`/api/task/copy/info?tid=${id}`, { token: user, body: {} })).data!;
          if (t.state === 7) return t;
          await new Promise((res) => setTimeout(res, 100));
        }
        throw new Error(`task ${id} did not fail`);
      };
      expect((await failed('g1.txt')).error).toBe('storage backend error');
      fault = new TypeError("Cannot read properties of undefined (reading 'size')");
      expect((await failed('g2.txt')).error).toBe('internal error');
      expect(ts.logs.some((l) => l.includes(detail) && l.includes('task failed'))).toBe(true);
    } finally {
      vfs.put = put;
    }
  }, 30_000);

  it('names an offline download\'s target relative to the base path', async () => {
    ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'offline_download_allow_private', value: 'true' }] }));
    const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', {
      token: user, body: { urls: ['http://127.0.0.1:1/a.bin'], path: '/dl', tool: 'SimpleHttp', delete_policy: 'delete_always' },
    });
    ok(r);
    expect(r.data!.tasks.map((t) => t.name)).toEqual(['download http://127.0.0.1:1/a.bin to (/dl)']);
  });
});

describe('download tools and secrets', () => {
  it('a user is not told the aria2 address (with its credentials) when aria2 cannot be reached', async () => {
    const closed = await freePort(); // nothing listens there
    const set = await ts.api('/api/admin/setting/set_aria2', { token: admin, body: { uri: `http://rpc:RPC-URI-PASS@127.0.0.1:${closed}/jsonrpc`, secret: 'ARIA2-RPC-SECRET' } });
    expect(set).toMatchObject({ code: 500, message: expect.stringMatching(/^failed get aria2 version: fetch failed: .*ECONNREFUSED/) });
    const qb = await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://qb:QBIT-URL-PASS@127.0.0.1:${closed}/`, seedtime: '0' } });
    expect(qb).toMatchObject({ code: 500, message: expect.stringMatching(/^fetch failed: .*ECONNREFUSED/) });
    expect(qb.message).not.toContain('QBIT-URL-PASS');
    for (const tool of ['aria2', 'qBittorrent']) {
      const r = await ts.api('/api/fs/add_offline_download', { token: user, body: { urls: ['http://127.0.0.1:1/b.bin'], path: '/dl', tool, delete_policy: 'delete_always' } });
      expectCode(r, 500, `failed init tool ${tool}`);
    }
    // The admin finds why in the log (a POST's failures were logged as "client went away", at debug)
    // and in the reply.
    expect(ts.logs.some((l) => l.includes('"msg":"storage error"') && l.includes('failed init tool aria2: fetch failed'))).toBe(true);
    const a = await ts.api('/api/fs/add_offline_download', { token: admin, body: { urls: ['http://127.0.0.1:1/b.bin'], path: '/home/u/dl', tool: 'qBittorrent', delete_policy: 'delete_always' } });
    expect(a.message).toMatch(/^failed init tool qBittorrent: fetch failed: .*ECONNREFUSED/);
  });

  it('logins on every protocol, tokens, signs and storage secrets leave nothing secret in the log', async () => {
    expect((await ts.api('/api/auth/login', { body: { username: 'u', password: 'wrong-user-password' } })).code).toBe(400);
    const wrongDav = await davRequest(ts.url, 'PROPFIND', '/dav/', { user: 'u', password: 'wrong-user-password', headers: { depth: '0' } });
    expect(wrongDav.status).toBe(401);
    await expect(withSsh2Sftp({ port: ts.sftpPort, username: 'u', password: 'wrong-user-password' }, async () => undefined)).rejects.toThrow();
    await ts.login(); // clears the failure counter
    const sign = (await ts.api<{ sign: string }>('/api/fs/get', { token: admin, body: { path: '/home/u/f.txt' } })).data!.sign;
    if (sign) SECRETS.push(sign);
    expect((await rawRequest(ts, 'GET', `/d/home/u/f.txt?sign=${encodeURIComponent(sign)}`)).status).toBe(200);
    expect((await rawRequest(ts, 'GET', '/d/home/u/f.txt?sign=not-a-valid-sign-value')).status).toBe(200);
    const id = (await createStorage(ts, admin, '/home/u/dav2', 'WebDav', remote.additionOf('WebDav'))).data!.id;
    ok(await ts.api('/api/admin/storage/update', {
      token: admin,
      body: { id, mount_path: '/home/u/dav2', driver: 'WebDav', cache_expiration: 0, addition: JSON.stringify({ ...remote.additionOf('WebDav'), password: remote.dav.password }) },
    }));
    await list(ts, user, '/dav2');
    expect(ts.logs.some((l) => l.includes('"msg":"request"') && l.includes('/d/home/u/f.txt'))).toBe(true);
  });
});
