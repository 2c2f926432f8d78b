/**
 * Follow-ups to today's reviews (each test failed before its fix): WebDAV locks on a storage mounted
 * inside a folder dropped when that folder was deleted or moved over REST, a WebDAV COPY of a folder
 * under a new name refused without the write bit only when it overwrote a target, a Range whose end
 * is before its start served whole over REST (416 over WebDAV and in AList), and SFTP SETSTAT on the
 * virtual folder of mount points inside a storage answering NO_SUCH_FILE.
 */
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWith } from '../src/sign.js';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';
import { statusCode, withSsh2Sftp } from './clients/sftp.js';
import { PERM, makeUser, ok, putFile } from './fs-helpers.js';

let ts: TestServer;
let dav: DavClient;
let admin: string;

beforeAll(async () => {
  ts = await startTestServer();
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
  admin = await ts.login();
});
afterAll(async () => {
  await ts?.close();
});

const mountMemory = async (mount_path: string) =>
  ok(await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path, driver: 'Memory', addition: '{}' } }));

describe('WebDAV locks on a storage mounted inside a folder', () => {
  const lockinfo =
    '<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>o</D:owner></D:lockinfo>';
  const prepare = async (dir: string) => {
    expect((await dav('MKCOL', dir)).status).toBe(201);
    await mountMemory(`${dir}/m`);
    expect((await dav('PUT', `${dir}/m/f.txt`, { body: 'f' })).status).toBe(201);
    const l = await dav('LOCK', `${dir}/m/f.txt`, { headers: { Depth: '0' }, body: lockinfo });
    expect(l.status).toBe(200);
    return String(l.headers['lock-token']);
  };
  const stillLocked = async (file: string, token: string) => {
    expect((await dav('PUT', file, { body: 'other' })).status, file).toBe(423); // without the token
    expect((await dav('PUT', file, { body: 'mine', headers: { If: `(${token})` } })).status).toBe(204);
  };

  it('stay when the folder holding its mount point is deleted over REST', async () => {
    const token = await prepare('/lkd');
    ok(await ts.api('/api/fs/remove', { token: admin, body: { dir: '/', names: ['lkd'] } }));
    await stillLocked('/lkd/m/f.txt', token);
  });

  it('neither block nor go with a WebDAV DELETE or MOVE of that folder', async () => {
    const token = await prepare('/lkwd');
    expect((await dav('PUT', '/lkwd/own.txt', { body: 'o' })).status).toBe(201);
    expect((await dav('DELETE', '/lkwd')).status).toBe(204); // the locked file is not deleted
    expect((await dav('PROPFIND', '/lkwd/own.txt', { headers: { Depth: '0' } })).status).toBe(404);
    await stillLocked('/lkwd/m/f.txt', token);
    const moved = await prepare('/lkwm');
    expect((await dav('PUT', '/lkwm/own.txt', { body: 'o' })).status).toBe(201);
    expect((await dav('MOVE', '/lkwm', { headers: { Destination: '/dav/lkwm2' } })).status).toBe(201);
    expect((await dav('GET', '/lkwm2/own.txt')).body).toBe('o');
    await stillLocked('/lkwm/m/f.txt', moved);
  });

  it('stay when that folder is moved over REST', async () => {
    const token = await prepare('/lkm');
    expect((await dav('MKCOL', '/lkto')).status).toBe(201);
    ok(await ts.api('/api/fs/move', { token: admin, body: { src_dir: '/', dst_dir: '/lkto', names: ['lkm'] } }));
    expect((await dav('PROPFIND', '/lkto/lkm', { headers: { Depth: '0' } })).status).toBe(207);
    await stillLocked('/lkm/m/f.txt', token);
  });
});

describe('WebDAV COPY of a folder under a new name without the write bit', () => {
  let user: DavClient;
  beforeAll(async () => {
    await makeUser(ts, admin, 'copier', PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE | PERM.COPY | PERM.REMOVE);
    user = davClient(ts.url, 'copier', 'pw-copier-123');
    await putFile(ts, admin, '/cpw/src/d/a.txt', 'a');
    await putFile(ts, admin, '/cpw/dst/old/x.txt', 'x');
    await putFile(ts, admin, '/cpw/src/taken/y.txt', 'y');
  });

  it('is the storage\'s copy whether the target is new or replaced (AList: the copy bit only); member by member it needs write', async () => {
    expect((await user('COPY', '/cpw/src/d', { headers: { Destination: '/dav/cpw/dst/new' } })).status).toBe(201);
    expect((await user('COPY', '/cpw/src/d', { headers: { Destination: '/dav/cpw/dst/old' } })).status).toBe(204);
    expect((await user('GET', '/cpw/dst/old/a.txt')).body).toBe('a');
    expect((await user('GET', '/cpw/dst/old/x.txt')).status).toBe(404);
    // Made member by member (its old name taken there), it needs write either way, and the target stays.
    expect((await user('COPY', '/cpw/src/d', { headers: { Destination: '/dav/cpw/src/fresh' } })).status).toBe(403);
    expect((await user('COPY', '/cpw/src/d', { headers: { Destination: '/dav/cpw/src/taken' } })).status).toBe(403);
    expect((await user('GET', '/cpw/src/taken/y.txt')).body).toBe('y');
  });
});

describe('a Range whose end is before its start', () => {
  it('is 416 on /d, /p and WebDAV, as Go\'s ServeContent answers it (AList)', async () => {
    await putFile(ts, admin, '/rng/f.txt', '0123456789');
    const sign = signWith(ts.running.core.settings.get('token'), '/rng/f.txt', 0);
    for (const p of ['/d', '/p']) {
      const res = await fetch(`${ts.url}${p}/rng/f.txt?sign=${sign}`, { headers: { Range: 'bytes=5-3' } });
      expect(res.status, p).toBe(416);
      await res.arrayBuffer();
    }
    expect((await dav('GET', '/rng/f.txt', { headers: { Range: 'bytes=5-3' } })).status).toBe(416);
  });
});

describe('SFTP SETSTAT on the virtual folder of mount points inside a storage', () => {
  it('answers OP_UNSUPPORTED, as on a virtual folder no storage covers, not NO_SUCH_FILE', async () => {
    await mountMemory('/vset/inner/m');
    await withSsh2Sftp({ port: ts.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, async (sf) => {
      const st = await new Promise<ssh2.Stats>((res, rej) => sf.stat('/vset/inner', (e, s) => (e ? rej(e) : res(s))));
      expect(st.isDirectory()).toBe(true); // listed and stat'ed as a folder
      const when = new Date('2020-01-01T00:00:00Z');
      expect(await statusCode((cb) => sf.utimes('/vset/inner', when, when, cb))).toBe(8); // OP_UNSUPPORTED
    });
  });
});
