/**
 * AList's `.balance` load balancing (src/vfs/balance.ts, src/vfs/mounts.ts): storages mounted at
 * `/test`, `/test.balance1`, `/test.balance2` serve `/test` together. Against the real server over
 * REST, WebDAV and SFTP, with Local storages whose folders hold the same names with different
 * contents (one byte each, same mtime), so every answer tells which member served it.
 */
import { mkdtemp, mkdir as mkdirHost, readdir, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWith } from '../src/sign.js';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { list, names, ok, putFile, startRestServer } from './fs-helpers.js';
import { connectSftpSurface } from './clients/sftp.js';

let ts: TestServer;
let admin: string;
const SAME_TIME = new Date('2024-05-06T07:08:09Z');

async function addStorage(mount_path: string, driver: string, addition: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<number> {
  const r = await ts.api<{ id: number }>('/api/admin/storage/create', { token: admin, body: { mount_path, driver, addition: JSON.stringify(addition), ...extra } });
  ok(r);
  return r.data!.id;
}

/** A Local storage at `mount` whose folder holds `same.txt` with `body`; returns its id and host folder. */
async function member(mount: string, body: string, extra: Record<string, unknown> = {}): Promise<{ id: number; root: string }> {
  const root = await mkdtemp(join(tmpdir(), 'treegate-balance-'));
  await writeFile(join(root, 'same.txt'), body);
  await utimes(join(root, 'same.txt'), SAME_TIME, SAME_TIME);
  await mkdirHost(join(root, 'dir'));
  return { id: await addStorage(mount, 'Local', { root_folder_path: root }, extra), root };
}

const auth = { authorization: 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64') };
const dav = (method: string, path: string, headers: Record<string, string> = {}) => fetch(`${ts.url}/dav${path}`, { method, headers: { ...auth, ...headers } });
const setEnabled = async (id: number, on: boolean) => ok(await ts.api(`/api/admin/storage/${on ? 'enable' : 'disable'}?id=${id}`, { token: admin, method: 'POST' }));

async function download(path: string): Promise<string> {
  const res = await fetch(`${ts.url}/d${path}?sign=${signWith(ts.running.core.settings.get('token'), path, 0)}`);
  expect(res.status).toBe(200);
  return res.text();
}

/** `n` answers in a row; each request is a new turn. */
async function inTurn(n: number, one: () => Promise<string>): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(await one());
  return out;
}

/** `got` goes round `members` (each once per round, in a fixed order), whichever member started. */
function expectRoundRobin(got: string[], members: string[]): void {
  const k = members.length;
  expect([...got.slice(0, k)].sort()).toEqual([...members].sort());
  for (let i = k; i < got.length; i++) expect(got[i]).toBe(got[i - k]);
}

const hostNames = async (dir: string) => (await readdir(dir)).sort();

let A: { id: number; root: string };
let B: { id: number; root: string };
let C: { id: number; root: string };

beforeAll(async () => {
  ts = await startTestServer();
  admin = await ts.login();
  A = await member('/test', 'A');
  B = await member('/test.balance1', 'B');
  C = await member('/test.balance2', 'C');
}, 30_000);
afterAll(async () => ts?.close());

describe('a .balance group', () => {
  it('is one folder in the tree on every protocol; the admin API keeps each mount path', async () => {
    const top = await names(ts, admin, '/');
    expect(top.filter((n) => n.startsWith('test'))).toEqual(['test']);
    const pf = await dav('PROPFIND', '/', { depth: '1' });
    expect(pf.status).toBe(207);
    const xml = await pf.text();
    expect(xml).toContain('/dav/test/');
    expect(xml).not.toContain('balance');
    const sftp = await connectSftpSurface(ts.sftpPort, 'admin', ADMIN_PASSWORD);
    try {
      const l = await sftp.list('/');
      expect(l.names.filter((n) => n.startsWith('test'))).toEqual(['test']);
    } finally {
      await sftp.close();
    }
    // The suffixed path is no place in the tree: the root storage has nothing there.
    const g = await ts.api('/api/fs/get', { token: admin, body: { path: '/test.balance1' } });
    expect(g.code).not.toBe(200);
    expect(g.message).toContain('not found');
    // Only the last segment's suffix counts: this storage sits where its mount path says (AList: at `/nest`).
    await member('/nest.balance1/inner', 'N');
    expect(await names(ts, admin, '/')).toContain('nest.balance1');
    expect(await names(ts, admin, '/nest.balance1')).toEqual(['inner']);
    expect(await download('/nest.balance1/inner/same.txt')).toBe('N');
    const admins = await ts.api<{ content: Array<{ mount_path: string }> }>('/api/admin/storage/list', { token: admin });
    ok(admins);
    expect(admins.data!.content.map((s) => s.mount_path)).toEqual(expect.arrayContaining(['/test', '/test.balance1', '/test.balance2']));
  });

  it('REST /d downloads take turns among the members', async () => {
    expectRoundRobin(await inTurn(6, () => download('/test/same.txt')), ['A', 'B', 'C']);
  });

  it('WebDAV GETs take turns among the members', async () => {
    const got = await inTurn(6, async () => {
      const res = await dav('GET', '/test/same.txt');
      expect(res.status).toBe(200);
      return res.text();
    });
    expectRoundRobin(got, ['A', 'B', 'C']);
  });

  it('SFTP reads take turns, one member per connection', async () => {
    const got = await inTurn(6, async () => {
      const sftp = await connectSftpSurface(ts.sftpPort, 'admin', ADMIN_PASSWORD);
      try {
        const first = await sftp.read('/test/same.txt');
        expect(first.outcome).toBe('ok');
        // Every read of one connection goes to the member its first read got.
        expect((await sftp.read('/test/same.txt')).body).toBe(first.body);
        return first.body;
      } finally {
        await sftp.close();
      }
    });
    expectRoundRobin(got, ['A', 'B', 'C']);
  });

  it('skips a member out of service; writes wait for the primary', async () => {
    await setEnabled(C.id, false);
    try {
      expectRoundRobin(await inTurn(4, () => download('/test/same.txt')), ['A', 'B']);
    } finally {
      await setEnabled(C.id, true);
    }
    await setEnabled(A.id, false);
    try {
      expectRoundRobin(await inTurn(4, () => download('/test/same.txt')), ['B', 'C']);
      expect(await names(ts, admin, '/test')).toEqual(['dir', 'same.txt']);
      // Writes do not go round to a member: the primary is out of service.
      const put = await putFile(ts, admin, '/test/while-off.txt', 'x');
      expect(put.message).toContain('disabled');
    } finally {
      await setEnabled(A.id, true);
    }
    for (const m of [A, B, C]) expect(await hostNames(m.root)).toEqual(['dir', 'same.txt']);
  });

  it('uploads, folders and renames land in the primary only', async () => {
    ok(await putFile(ts, admin, '/test/up.txt', 'u'));
    ok(await ts.api('/api/fs/mkdir', { token: admin, body: { path: '/test/made' } }));
    ok(await ts.api('/api/fs/rename', { token: admin, body: { path: '/test/up.txt', name: 'up2.txt' } }));
    const sftp = await connectSftpSurface(ts.sftpPort, 'admin', ADMIN_PASSWORD);
    try {
      expect(await sftp.upload('/test/dir/by-sftp.txt', 's')).toBe('ok');
    } finally {
      await sftp.close();
    }
    expect((await dav('PUT', '/test/dir/by-dav.txt', { 'content-type': 'text/plain' })).status).toBe(201);
    expect(await hostNames(A.root)).toEqual(['dir', 'made', 'same.txt', 'up2.txt']);
    expect(await hostNames(join(A.root, 'dir'))).toEqual(['by-dav.txt', 'by-sftp.txt']);
    for (const m of [B, C]) {
      expect(await hostNames(m.root)).toEqual(['dir', 'same.txt']);
      expect(await hostNames(join(m.root, 'dir'))).toEqual([]);
    }
  });

  it('without an unsuffixed storage, the first working one by order is the primary, and renames in it always work', async () => {
    // order 0 before order 1, whatever the mount paths say.
    const second = await member('/solo.balance1', '1', { order: 1 });
    const first = await member('/solo.balance2', '2', { order: 0 });
    ok(await putFile(ts, admin, '/solo/f0.txt', 'f'));
    for (let i = 0; i < 8; i++) {
      // Reads in between take their turns; every rename still finds its file and its folder on one storage.
      ok(await list(ts, admin, '/solo'));
      ok(await ts.api('/api/fs/rename', { token: admin, body: { path: `/solo/f${i}.txt`, name: `f${i + 1}.txt` } }));
    }
    expect(await hostNames(first.root)).toEqual(['dir', 'f8.txt', 'same.txt']);
    expect(await hostNames(second.root)).toEqual(['dir', 'same.txt']);
    expectRoundRobin(await inTurn(4, () => download('/solo/same.txt')), ['1', '2']);
  });

  it('a write through the primary, or a refresh, leaves no stale cached listing in the other members', async () => {
    // Two WebDav storages (they cache listings) on the same folder of a second server.
    const remote = await startRestServer();
    try {
      const remoteAdmin = await remote.login();
      ok(await remote.api('/api/fs/mkdir', { token: remoteAdmin, body: { path: '/shared' } }));
      ok(await putFile(remote, remoteAdmin, '/shared/old.txt', 'o'));
      const addition = { address: `${remote.url}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/shared' };
      await addStorage('/cached.balance1', 'WebDav', addition, { cache_expiration: 30 });
      await addStorage('/cached.balance2', 'WebDav', addition, { cache_expiration: 30 });
      // Each member lists the folder once and keeps the listing.
      for (let i = 0; i < 2; i++) expect(await names(ts, admin, '/cached')).toEqual(['old.txt']);
      ok(await putFile(ts, admin, '/cached/new.txt', 'n'));
      for (let i = 0; i < 2; i++) expect(await names(ts, admin, '/cached')).toEqual(['new.txt', 'old.txt']);
      // A change made on the remote itself, then a refresh: it is asked of the folder, whichever member answers next.
      ok(await putFile(remote, remoteAdmin, '/shared/outside.txt', 'x'));
      const fresh = await list(ts, admin, '/cached', { refresh: true });
      ok(fresh);
      expect(fresh.data!.content.map((e) => e.name).sort()).toEqual(['new.txt', 'old.txt', 'outside.txt']);
      for (let i = 0; i < 2; i++) expect(await names(ts, admin, '/cached')).toEqual(['new.txt', 'old.txt', 'outside.txt']);
    } finally {
      await remote.close();
    }
  }, 30_000);
});
