/**
 * One storage per remote driver, each against its real server on loopback, driven only through
 * treegate's REST API: a folder goes S3 → SFTP → WebDAV → FTP → Local by copy tasks and keeps its
 * checksums; init failures show in `status` within a bound and block nothing else; a remote that
 * goes away gives clear errors and works again when it returns.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdir, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { list, names, ok, putFile, startRestServer } from './fs-helpers.js';
import { addLocalStorage, settle, until } from './tasks-helpers.js';
import type { TaskInfo } from '../src/tasks/types.js';
import { switchProxy, type SwitchProxy } from '../drivers/testing/switch-proxy.js';
import { createStorage, REMOTE_DRIVERS, startRemoteServers, type RemoteDriver, type RemoteServers } from './remote-servers.js';

/** The folder copied around: small, one ~3 MB file, an empty file, a nested folder, non-ASCII names. */
const FILES: Record<string, Buffer> = {
  'a.txt': Buffer.from('hello across five storages\n'),
  'big.bin': randomBytes(3 * 1024 * 1024 + 123),
  'empty.txt': Buffer.alloc(0),
  'sub dir/ünï cödé.txt': Buffer.from('nested and unicode\n'.repeat(50)),
  'sub dir/deeper/c.json': Buffer.from(JSON.stringify({ deep: true, n: 42 })),
};
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const ORIGINAL = Object.fromEntries(Object.entries(FILES).map(([k, v]) => [k, sha(v)]));

/** relative path → sha256 of every file under a host folder. */
async function tree(dir: string, prefix = ''): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const rel = prefix + e.name;
    if (e.isDirectory()) Object.assign(out, await tree(join(dir, e.name), rel + '/'));
    else out[rel] = sha(await readFile(join(dir, e.name)));
  }
  return out;
}

let ts: TestServer;
let admin: string;
let remote: RemoteServers;
let backRoot: string;
const proxies: SwitchProxy[] = [];

const create = (mount_path: string, driver: string, addition: Record<string, unknown>) => createStorage(ts, admin, mount_path, driver, addition);
const statusOf = async (id: number) => (await ts.api<{ status: string }>(`/api/admin/storage/get?id=${id}`, { token: admin })).data!.status;

beforeAll(async () => {
  remote = await startRemoteServers(REMOTE_DRIVERS);
  ts = await startRestServer();
  admin = await ts.login();
  const mounts: Array<[string, RemoteDriver]> = [['/s3', 'S3'], ['/sftp', 'SFTP'], ['/dav', 'WebDav'], ['/ftp', 'FTP']];
  for (const [mount, driver] of mounts) ok(await create(mount, driver, remote.additionOf(driver)));
  backRoot = await addLocalStorage(ts, admin, '/back');
}, 60_000);

afterAll(async () => {
  await Promise.allSettled(proxies.map((p) => p.close()));
  await ts?.close();
  await remote?.stop();
  if (backRoot) await rm(backRoot, { recursive: true, force: true });
});

/** Copy /<from>/set into /<to> over REST and wait for every copy task; all must succeed. */
async function hop(from: string, to: string): Promise<void> {
  const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/copy', { token: admin, body: { src_dir: from, dst_dir: to, names: ['set'] } });
  ok(r);
  expect(r.data!.tasks).toHaveLength(1);
  const done = await settle(ts, admin, 'copy', 120_000);
  expect(done.filter((t) => t.state !== 2).map((t) => `${t.name}: ${t.error}`)).toEqual([]);
  // 5 files + 3 folders (set, sub dir, deeper), each its own task.
  expect(done).toHaveLength(8);
  ok(await ts.api('/api/task/copy/clear_done', { token: admin, body: {} }));
}

describe('a folder through every remote driver', () => {
  it('uploads into S3, copies S3 → SFTP → WebDAV → FTP → Local, and every hop keeps every checksum', async () => {
    for (const [rel, data] of Object.entries(FILES)) ok(await putFile(ts, admin, `/s3/set/${rel}`, data));
    expect(await names(ts, admin, '/s3/set')).toEqual(['a.txt', 'big.bin', 'empty.txt', 'sub dir']);

    await hop('/s3', '/sftp');
    expect(await tree(join(remote.sshd.dataDir, 'set'))).toEqual(ORIGINAL);
    await hop('/sftp', '/dav');
    expect(await tree(join(remote.dav.dataDir, 'set'))).toEqual(ORIGINAL);
    await hop('/dav', '/ftp');
    expect(await tree(join(remote.ftpd.dataDir, 'set'))).toEqual(ORIGINAL);
    await hop('/ftp', '/back');
    expect(await tree(join(backRoot, 'set'))).toEqual(ORIGINAL);

    // And reads back through REST as uploaded: FTP is proxy-only, so raw_url is treegate's signed /p URL.
    const got = await ts.api<{ raw_url: string; size: number }>('/api/fs/get', { token: admin, body: { path: '/ftp/set/big.bin' } });
    ok(got);
    expect(got.data!.size).toBe(FILES['big.bin']!.length);
    const res = await fetch(got.data!.raw_url);
    expect(res.status).toBe(200);
    expect(sha(Buffer.from(await res.arrayBuffer()))).toBe(ORIGINAL['big.bin']);
  }, 240_000);
});

describe('WebDAV PUT with X-OC-Mtime onto remote storages', () => {
  it('answers "X-OC-MTime: accepted" only where the mtime was kept (SFTP, FTP with MFMT), not where it cannot be set (WebDAV, S3)', async () => {
    const auth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
    const put = async (mount: string) => {
      const r = await fetch(`${ts.url}/dav${mount}/mtime.txt`, { method: 'PUT', headers: { authorization: auth, 'x-oc-mtime': '1600000000' }, body: 'kept?' });
      const got = await ts.api<{ modified: string }>('/api/fs/get', { token: admin, body: { path: `${mount}/mtime.txt` } });
      return { status: r.status, header: r.headers.get('x-oc-mtime'), kept: new Date(got.data!.modified).getTime() === 1600000000_000 };
    };
    expect(await put('/sftp')).toEqual({ status: 201, header: 'accepted', kept: true });
    expect(await put('/ftp')).toEqual({ status: 201, header: 'accepted', kept: true });
    expect(await put('/dav')).toEqual({ status: 201, header: null, kept: false });
    expect(await put('/s3')).toEqual({ status: 201, header: null, kept: false });
  });
});

describe('init failures and unreachable remotes', () => {
  it('wrong credentials show in the storage status quickly, and the other storages keep working', async () => {
    const bad: Array<[RemoteDriver, Record<string, unknown>, RegExp]> = [
      ['S3', { access_key_id: 'WRONG' }, /access denied by S3/],
      ['SFTP', { private_key: '', password: 'wrong-password' }, /sftp: authentication failed for user/],
      ['WebDav', { password: 'wrong' }, /authentication failed \(401\)/],
      ['FTP', { password: 'wrong' }, /ftp: login failed for user/],
    ];
    for (const [driver, extra, text] of bad) {
      const t0 = Date.now();
      const r = await create(`/bad-${driver.toLowerCase()}`, driver, { ...remote.additionOf(driver), ...extra });
      expect(Date.now() - t0, driver).toBeLessThan(10_000);
      expect(r.code, driver).toBe(500);
      expect(r.message).toMatch(/^failed init storage but storage is already created: failed init storage: /);
      expect(r.message).toMatch(text);
      expect(await statusOf((r.data as { id: number }).id)).toMatch(text);
      // Using it says why, instead of falling through to another storage.
      expect((await list(ts, admin, `/bad-${driver.toLowerCase()}`)).message).toMatch(text);
    }
    ok(await putFile(ts, admin, '/s3/still-works.txt', 'yes'));
    expect(await names(ts, admin, '/s3')).toContain('still-works.txt');
    ok(await list(ts, admin, '/ftp'));
  }, 60_000);

  it('a remote that never answers is bounded by the init timeout and blocks no other storage meanwhile', async () => {
    const mute = net.createServer(() => undefined); // accepts, never speaks
    await new Promise<void>((r) => mute.listen(0, '127.0.0.1', () => r()));
    try {
      const t0 = Date.now();
      const pending = create('/mute', 'SFTP', { address: `127.0.0.1:${(mute.address() as net.AddressInfo).port}`, username: 'x', password: 'y' });
      await new Promise((r) => setTimeout(r, 300));
      const t1 = Date.now();
      expect(Array.isArray(await names(ts, admin, '/sftp'))).toBe(true);
      expect(await names(ts, admin, '/')).toEqual(expect.arrayContaining(['back', 'dav', 'ftp', 'mute', 's3', 'sftp']));
      expect(Date.now() - t1).toBeLessThan(5_000);
      const r = await pending;
      expect(r.code).toBe(500);
      expect(r.message).toMatch(/timed out/);
      expect(Date.now() - t0).toBeLessThan(25_000);
      expect(await statusOf((r.data as { id: number }).id)).toMatch(/timed out/);
    } finally {
      mute.close();
    }
  }, 40_000);

  it.each(['S3', 'SFTP', 'WebDav', 'FTP'] as const)('%s: clear errors while the remote is down, works again when it is back', async (driver) => {
    const proxy = await switchProxy(remote.portOf(driver));
    proxies.push(proxy);
    const mount = `/flaky-${driver.toLowerCase()}`;
    const created = await create(mount, driver, remote.additionOf(driver, proxy.port));
    ok(created);
    const id = created.data!.id;
    const inside = `${mount}/probe-${driver}`;
    ok(await putFile(ts, admin, `${inside}/a.txt`, 'before'));
    expect(await names(ts, admin, inside)).toEqual(['a.txt']);

    await proxy.down();
    const t0 = Date.now();
    const r = await list(ts, admin, inside, { refresh: true });
    expect(r.code).toBe(500);
    expect(r.message).toMatch(/ECONNREFUSED|cannot (reach|connect)/);
    expect(Date.now() - t0).toBeLessThan(15_000);
    // The storage itself is fine (AList keeps `work` too): only the remote is unreachable.
    expect(await statusOf(id)).toBe('work');

    await proxy.up();
    await until(`${driver} back`, async () => ((await list(ts, admin, inside, { refresh: true })).code === 200 ? true : undefined), 20_000, 250);
    expect(await names(ts, admin, inside)).toContain('a.txt');
    ok(await putFile(ts, admin, `${inside}/after.txt`, 'written after the reconnect'));
    expect(await names(ts, admin, inside)).toContain('after.txt');
  }, 60_000);
});
