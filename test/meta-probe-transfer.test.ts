/**
 * Moving, renaming or copying a *folder* carries everything below it, while meta rules stay at
 * their paths. A user who may not see an entry (hide) or open a folder (path password) must not
 * make it reachable by moving or copying one of its ancestors somewhere the rule does not reach
 * (a rename of the folder is enough). The same refusal holds on REST, WebDAV and SFTP; moves that
 * cannot change what the user may reach (the same rule on both sides) stay allowed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import ssh2 from 'ssh2';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { addMeta, makeUser, names, ok, PERM, seed } from './fs-helpers.js';
import { davClient } from './clients/webdav.js';
import { statusCode, withSsh2Sftp } from './clients/sftp.js';

const STATUS = ssh2.utils.sftp.STATUS_CODE;
const PROTO = PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE | PERM.SFTP_READ | PERM.SFTP_MANAGE;
const OPS = PERM.RENAME | PERM.MOVE | PERM.COPY | PERM.REMOVE;

let ts: TestServer;
let admin: string;
let bob: string;
let seer: string;
const exposeMsg = 'the folder holds entries hidden from you or protected by a password';

beforeAll(async () => {
  ts = await startTestServer();
  admin = await ts.login();
  await seed(ts, admin, {
    '/share/proj/locked/secret.txt': 'L', '/share/proj/ok.txt': 'o', // password rule inside the folder
    '/share/docs/.private.txt': 'P', '/share/docs/public.txt': 'p', // hide rule at the folder itself
    '/dot/a/.env': 'E', '/dot/a/app.txt': 'a', '/dot/clean/c.txt': 'c', // hide rule above, with h_sub
    '/out/.keep': '',
  });
  await addMeta(ts, admin, { path: '/share/proj/locked', password: 'pw', p_sub: true });
  await addMeta(ts, admin, { path: '/share/docs', hide: '^\\.' });
  await addMeta(ts, admin, { path: '/dot', hide: '^\\.', h_sub: true });
  bob = await makeUser(ts, admin, 'bob', PROTO | OPS);
  seer = await makeUser(ts, admin, 'seer', PROTO | OPS | PERM.SEE_HIDDEN | PERM.NO_PASSWORD);
});
afterAll(async () => ts?.close());

const api = (path: string, body: unknown, token = bob) => ts.api(path, { token, body });

describe('REST', () => {
  it('refuses to copy a folder holding a password-protected folder', async () => {
    const r = await api('/api/fs/copy', { src_dir: '/share', dst_dir: '/out', names: ['proj'] });
    expect({ code: r.code, message: r.message }).toEqual({ code: 403, message: exposeMsg });
    expect(await names(ts, admin, '/out')).toEqual(['.keep']);
  });

  it('refuses to rename a folder whose hide rule would stay behind', async () => {
    const r = await api('/api/fs/rename', { path: '/share/docs', name: 'docs2' });
    expect(r.code).toBe(403);
    expect(await names(ts, admin, '/share')).toEqual(['docs', 'proj']);
  });

  it('refuses to move a folder out of the reach of an ancestor hide rule (h_sub)', async () => {
    const r = await api('/api/fs/move', { src_dir: '/dot', dst_dir: '/out', names: ['a'] });
    expect(r.code).toBe(403);
    expect(await names(ts, admin, '/dot/a')).toEqual(['.env', 'app.txt']);
  });

  it('still moves and copies what the rules treat alike, and lets see-hidden + no-password users through', async () => {
    ok(await api('/api/fs/rename', { path: '/dot/a', name: 'a2' })); // same h_sub rule on both sides
    ok(await api('/api/fs/rename', { path: '/dot/a2', name: 'a' }));
    ok(await api('/api/fs/copy', { src_dir: '/dot', dst_dir: '/out', names: ['clean'] })); // nothing hidden inside
    ok(await api('/api/fs/copy', { src_dir: '/share', dst_dir: '/out', names: ['docs'] }, seer));
    expect(await names(ts, admin, '/out')).toEqual(['.keep', 'clean', 'docs']);
  });
});

describe('WebDAV', () => {
  it('COPY and MOVE of such folders are 403 and change nothing', async () => {
    const dav = davClient(ts.url, 'bob', 'pw-bob-123');
    const to = (dst: string) => ({ headers: { destination: `/dav${dst}` } });
    expect((await dav('COPY', '/share/proj', to('/out/proj'))).status).toBe(403);
    expect((await dav('MOVE', '/share/docs', to('/out/docs-moved'))).status).toBe(403);
    expect((await dav('COPY', '/dot/a', to('/out/a'))).status).toBe(403);
    const root = davClient(ts.url, 'admin', ADMIN_PASSWORD);
    expect((await root('PROPFIND', '/out/proj', { headers: { depth: '0' } })).status).toBe(404);
    expect((await root('GET', '/share/docs/.private.txt')).body).toBe('P');
  });
});

describe('SFTP', () => {
  it('RENAME of such folders is PERMISSION_DENIED', async () => {
    const codes = await withSsh2Sftp({ port: ts.sftpPort, username: 'bob', password: 'pw-bob-123' }, async (sftp) => [
      await statusCode((cb) => sftp.rename('/share/proj', '/out/proj', cb)),
      await statusCode((cb) => sftp.rename('/share/docs', '/share/docs2', cb)),
      await statusCode((cb) => sftp.rename('/dot/a', '/out/a', cb)),
    ]);
    expect(codes).toEqual([STATUS.PERMISSION_DENIED, STATUS.PERMISSION_DENIED, STATUS.PERMISSION_DENIED]);
    expect(await names(ts, admin, '/share')).toEqual(['docs', 'proj']);
  });
});

