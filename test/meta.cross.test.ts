/**
 * One meta scenario (password, write=false / write=true, hide, readme) and one permission matrix,
 * checked through every protocol surface: the same user must get the same answer everywhere
 * (decision 3). Each surface is a driver object that maps its protocol's answers to a neutral
 * Outcome: REST (fetch), WebDAV (raw HTTP requests) and SFTP (ssh2 client) share the scenarios.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { addMeta, ok, PERM, seed } from './fs-helpers.js';
import { connectSftpSurface } from './clients/sftp.js';
import { davClient, type DavResponse } from './clients/webdav.js';

/** Protocol-neutral result: denied = permission bit, meta write or path password refused. */
type Outcome = 'ok' | 'denied' | 'not_found';

interface Client {
  list(path: string, password?: string): Promise<{ outcome: Outcome; names: string[] }>;
  read(path: string, password?: string): Promise<{ outcome: Outcome; body: string }>;
  upload(path: string, body: string): Promise<Outcome>;
  mkdir(path: string): Promise<Outcome>;
  rename(path: string, newName: string): Promise<Outcome>;
  move(path: string, dstDir: string): Promise<Outcome>;
  /** Absent where the protocol has no copy (SFTP v3): the matrix skips that column. */
  copy?(path: string, dstDir: string): Promise<Outcome>;
  remove(path: string): Promise<Outcome>;
  /** Surfaces without a readme notion return undefined. */
  readme(path: string): Promise<string | undefined>;
  /** Surfaces that can send a path password (REST) say so; others skip those rows. */
  readonly sendsPassword: boolean;
  close(): Promise<void>;
}

interface Surface {
  name: string;
  connect(ts: TestServer, username: string, password: string): Promise<Client>;
}

// ---- REST surface -----------------------------------------------------------------------------

function restOutcome(env: { code: number; message: string }): Outcome {
  if (env.code === 200) return 'ok';
  if (env.code === 403) return 'denied';
  if (env.code === 500 && /object not found$/.test(env.message)) return 'not_found';
  throw new Error(`unexpected REST answer ${env.code} ${env.message}`);
}

const restSurface: Surface = {
  name: 'rest',
  async connect(ts, username, password) {
    const token = await ts.login(username, password);
    const post = (p: string, body: unknown) => ts.api<Record<string, unknown>>(p, { token, body });
    const split = (p: string) => ({ dir: p.replace(/\/[^/]*$/, '') || '/', name: p.replace(/^.*\//, '') });
    return {
      sendsPassword: true,
      async list(path, pw) {
        const r = await ts.api<{ content: Array<{ name: string }> }>('/api/fs/list', { token, body: { path, password: pw ?? '' } });
        return { outcome: restOutcome(r), names: (r.data?.content ?? []).map((e) => e.name).sort() };
      },
      async read(path, pw) {
        const r = await ts.api<{ raw_url: string }>('/api/fs/get', { token, body: { path, password: pw ?? '' } });
        if (r.code !== 200) return { outcome: restOutcome(r), body: '' };
        return { outcome: 'ok', body: await (await fetch(r.data!.raw_url)).text() };
      },
      async upload(path, body) {
        const res = await fetch(ts.url + '/api/fs/put', { method: 'PUT', headers: { authorization: token, 'file-path': encodeURIComponent(path) }, body });
        return restOutcome((await res.json()) as { code: number; message: string });
      },
      mkdir: async (path) => restOutcome(await post('/api/fs/mkdir', { path })),
      rename: async (path, name) => restOutcome(await post('/api/fs/rename', { path, name })),
      move: async (path, dst) => restOutcome(await post('/api/fs/move', { src_dir: split(path).dir, dst_dir: dst, names: [split(path).name] })),
      copy: async (path, dst) => restOutcome(await post('/api/fs/copy', { src_dir: split(path).dir, dst_dir: dst, names: [split(path).name] })),
      remove: async (path) => restOutcome(await post('/api/fs/remove', { dir: split(path).dir, names: [split(path).name] })),
      async readme(path) {
        return ((await ts.api<{ readme: string }>('/api/fs/list', { token, body: { path } })).data ?? { readme: '' }).readme;
      },
      close: async () => undefined,
    };
  },
};

// ---- SFTP surface (ssh2 client, password login; see test/clients/sftp.ts) ------------------------

const sftpSurface: Surface = {
  name: 'sftp',
  connect: (ts, username, password) => connectSftpSurface(ts.sftpPort, username, password),
};

// ---- WebDAV surface (Basic auth on every request; no path password, no readme) --------------------

function davOutcome(r: DavResponse): Outcome {
  if (r.status >= 200 && r.status < 300) return 'ok';
  if (r.status === 403) return 'denied';
  if (r.status === 404) return 'not_found';
  throw new Error(`unexpected WebDAV answer ${r.status} ${r.body.slice(0, 200)}`);
}

const webdavSurface: Surface = {
  name: 'webdav',
  async connect(ts, username, password) {
    const dav = davClient(ts.url, username, password);
    const enc = (p: string) => p.split('/').map(encodeURIComponent).join('/');
    const name = (p: string) => p.replace(/^.*\//, '');
    const to = (method: 'MOVE' | 'COPY', src: string, dst: string) =>
      dav(method, enc(src), { headers: { destination: `${ts.url}/dav${enc(dst)}`, overwrite: 'F' } }).then(davOutcome);
    return {
      sendsPassword: false,
      async list(path) {
        const r = await dav('PROPFIND', enc(path), { headers: { depth: '1' } });
        if (r.status !== 207) return { outcome: davOutcome(r), names: [] };
        const hrefs = [...r.body.matchAll(/<(?:[\w-]+:)?href>([^<]+)<\//g)].map((m) => decodeURIComponent(m[1]!).replace(/\/$/, ''));
        return { outcome: 'ok', names: hrefs.filter((h) => h !== `/dav${path}`).map(name).sort() };
      },
      async read(path) {
        const r = await dav('GET', enc(path));
        return { outcome: davOutcome(r), body: r.status === 200 ? r.body : '' };
      },
      upload: async (path, body) => davOutcome(await dav('PUT', enc(path), { body })),
      mkdir: async (path) => davOutcome(await dav('MKCOL', enc(path))),
      rename: (path, newName) => to('MOVE', path, path.replace(/[^/]*$/, newName)),
      move: (path, dst) => to('MOVE', path, `${dst}/${name(path)}`),
      copy: (path, dst) => to('COPY', path, `${dst}/${name(path)}`),
      remove: async (path) => davOutcome(await dav('DELETE', enc(path))),
      readme: async () => undefined,
      close: async () => undefined,
    };
  },
};

const SURFACES: Surface[] = [restSurface, webdavSurface, sftpSurface];

// ---- the scenarios ----------------------------------------------------------------------------

/** Protocol login and manage bits for every test user, so only the fs bits under test differ. */
const PROTOCOL_BITS = PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE | PERM.SFTP_READ | PERM.SFTP_MANAGE;

const MATRIX_USERS: Record<string, number> = {
  none: 0, write: PERM.WRITE, rename: PERM.RENAME, move: PERM.MOVE, copy: PERM.COPY, remove: PERM.REMOVE,
  all: PERM.WRITE | PERM.RENAME | PERM.MOVE | PERM.COPY | PERM.REMOVE,
};
type Op = 'upload' | 'mkdir' | 'rename' | 'move' | 'copy' | 'remove';
const OP_BIT: Record<Op, number> = { upload: PERM.WRITE, mkdir: PERM.WRITE, rename: PERM.RENAME, move: PERM.MOVE, copy: PERM.COPY, remove: PERM.REMOVE };

let ts: TestServer;

beforeAll(async () => {
  ts = await startTestServer(); // SFTP on: the SFTP surface needs it
  const admin = await ts.login();
  await seed(ts, admin, {
    '/meta/locked/in.txt': 'locked-body', '/meta/hid/visible.txt': 'v', '/meta/hid/.hidden.txt': 'h', '/meta/hid/.dir/x.txt': 'x',
    '/meta/ro/keep.txt': 'k', '/meta/rw/keep.txt': 'k',
  });
  await addMeta(ts, admin, { path: '/meta/locked', password: 'pw', p_sub: true });
  await addMeta(ts, admin, { path: '/meta/hid', hide: '^\\.', readme: 'HELLO' });
  await addMeta(ts, admin, { path: '/meta/ro', write: false, w_sub: true });
  await addMeta(ts, admin, { path: '/meta/rw', write: true, w_sub: true });
  const users = { meta: PROTOCOL_BITS, ...Object.fromEntries(Object.entries(MATRIX_USERS).map(([k, v]) => [`m-${k}`, v | PROTOCOL_BITS])) };
  for (const [username, permission] of Object.entries(users)) {
    ok(await ts.api('/api/admin/user/create', { token: admin, body: { username, password: `pw-${username}`, permission, base_path: '/', role: 0 } }));
  }
  for (const s of SURFACES) {
    for (const u of Object.keys(MATRIX_USERS)) {
      const base = `/matrix/${s.name}/${u}`;
      await seed(ts, admin, { [`${base}/rename.txt`]: 'r', [`${base}/move.txt`]: 'm', [`${base}/copy.txt`]: 'c', [`${base}/remove.txt`]: 'x' });
      ok(await ts.api('/api/fs/mkdir', { token: admin, body: { path: `${base}/dst` } }));
    }
  }
});
afterAll(async () => ts?.close());

describe.each(SURFACES)('meta scenario over $name', (surface) => {
  let c: Client;
  beforeAll(async () => {
    c = await surface.connect(ts, 'meta', 'pw-meta');
  });
  afterAll(async () => c?.close());

  it('hide: hidden entries are neither listed nor reachable by path', async () => {
    const l = await c.list('/meta/hid');
    expect(l).toEqual({ outcome: 'ok', names: ['visible.txt'] });
    expect((await c.read('/meta/hid/.hidden.txt')).outcome).toBe('not_found');
    expect((await c.read('/meta/hid/.dir/x.txt')).outcome).toBe('not_found');
    expect((await c.list('/meta/hid/.dir')).outcome).toBe('not_found');
    expect(await c.read('/meta/hid/visible.txt')).toEqual({ outcome: 'ok', body: 'v' });
  });

  it('password: refused without it (on every surface), served with it where the protocol can send one', async () => {
    expect((await c.list('/meta/locked')).outcome).toBe('denied');
    expect((await c.read('/meta/locked/in.txt')).outcome).toBe('denied');
    if (c.sendsPassword) {
      expect((await c.list('/meta/locked', 'wrong')).outcome).toBe('denied');
      expect(await c.list('/meta/locked', 'pw')).toEqual({ outcome: 'ok', names: ['in.txt'] });
      expect(await c.read('/meta/locked/in.txt', 'pw')).toEqual({ outcome: 'ok', body: 'locked-body' });
    }
  });

  it('write=false adds nothing to a user without the write bit; write=true grants create/upload', async () => {
    // Names per surface: every surface runs against the same tree, and SFTP MKDIR / WebDAV MKCOL
    // refuse an existing folder where REST mkdir does not.
    const n = surface.name;
    expect(await c.upload(`/meta/ro/new-${n}.txt`, 'n')).toBe('denied');
    expect(await c.mkdir(`/meta/ro/newdir-${n}`)).toBe('denied');
    expect(await c.upload(`/meta/rw/new-${n}.txt`, 'n')).toBe('ok');
    expect(await c.mkdir(`/meta/rw/newdir-${n}`)).toBe('ok');
    expect(await c.read(`/meta/rw/new-${n}.txt`)).toEqual({ outcome: 'ok', body: 'n' });
    // meta write grants creating, not the other operations (they keep their own bits, as in AList)
    expect(await c.remove('/meta/rw/keep.txt')).toBe('denied');
  });

  it('readme (where the surface has one)', async () => {
    const r = await c.readme('/meta/hid');
    if (r !== undefined) expect(r).toBe('HELLO');
  });
});

describe.each(SURFACES)('permission matrix over $name', (surface) => {
  for (const [user, bits] of Object.entries(MATRIX_USERS)) {
    it(`user with ${user} bits`, async () => {
      const c = await surface.connect(ts, `m-${user}`, `pw-m-${user}`);
      try {
        const base = `/matrix/${surface.name}/${user}`;
        const got: Partial<Record<Op, Outcome>> = {
          upload: await c.upload(`${base}/up.txt`, 'u'),
          mkdir: await c.mkdir(`${base}/newdir`),
          rename: await c.rename(`${base}/rename.txt`, 'renamed.txt'),
          move: await c.move(`${base}/move.txt`, `${base}/dst`),
          ...(c.copy ? { copy: await c.copy(`${base}/copy.txt`, `${base}/dst`) } : {}),
          remove: await c.remove(`${base}/remove.txt`),
        };
        const ops = Object.entries(OP_BIT).filter(([op]) => op !== 'copy' || c.copy);
        const want = Object.fromEntries(ops.map(([op, bit]) => [op, bits & bit ? 'ok' : 'denied']));
        expect(got).toEqual(want);
        const after = (await c.list(base)).names;
        expect(after.includes('renamed.txt')).toBe(!!(bits & PERM.RENAME));
        expect(after.includes('move.txt')).toBe(!(bits & PERM.MOVE));
        expect(after.includes('remove.txt')).toBe(!(bits & PERM.REMOVE));
        expect(after.includes('up.txt')).toBe(!!(bits & PERM.WRITE));
      } finally {
        await c.close();
      }
    });
  }
});
