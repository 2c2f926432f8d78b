/**
 * Code-review probe of the FTP and SFTP drivers through the whole server, against a real vsftpd and
 * OpenSSH sshd on loopback.
 */
import { chmod, chown, lchown, mkdir, readdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseOptions } from '../drivers/options.js';
import { startSshd } from '../drivers/testing/sshd.js';
import type { DriverDefinition } from '../drivers/types.js';
import { sftpDefinition } from '../drivers/sftp/index.js';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { additionFor, createStorage, startRemoteServers, type RemoteServers } from './remote-servers.js';

let ts: TestServer;
let admin: string;
let remote: RemoteServers<'FTP' | 'SFTP'>;
const davAuth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

beforeAll(async () => {
  remote = await startRemoteServers(['FTP', 'SFTP'] as const);
  ts = await startRestServer();
  admin = await ts.login();
  ok(await createStorage(ts, admin, '/ftp', 'FTP', remote.additionOf('FTP')));
  ok(await createStorage(ts, admin, '/sftp', 'SFTP', remote.additionOf('SFTP')));
}, 60_000);

afterAll(async () => {
  await ts?.close();
  await remote?.stop();
});

const fsGet = (path: string) => ts.api<{ name: string; size: number; is_dir: boolean }>('/api/fs/get', { token: admin, body: { path } });
const fsList = (path: string) => ts.api<{ content: Array<{ name: string; size: number; is_dir: boolean }> | null }>('/api/fs/list', { token: admin, body: { path, refresh: true } });
const propfind = async (path: string) => (await fetch(`${ts.url}/dav${path.split('/').map(encodeURIComponent).join('/')}`, { method: 'PROPFIND', headers: { authorization: davAuth, depth: '0' } })).status;

describe('FTP: a path is looked up in its parent folder only', () => {
  it('a name under a file, or under a parent whose name is a LIST wildcard, is not found', async () => {
    ok(await putFile(ts, admin, '/ftp/look/a.txt', 'hello'));
    for (const p of ['/ftp/look/a.txt/a.txt', '/ftp/look/a*/a.txt', '/ftp/look/?/a.txt']) {
      const r = await fsGet(p);
      expect({ p, code: r.code }).toEqual({ p, code: 500 });
      expect(r.message).toMatch(/not found/);
      expect({ p, status: await propfind(p) }).toEqual({ p, status: 404 });
    }
    const r = await fsGet('/ftp/look/a.txt');
    ok(r);
    expect(r.data!.size).toBe(5);
  });
});

describe('FTP: symbolic links on the server', () => {
  it('a link to a folder is a folder, a link to a file has the file\'s size', async () => {
    const dir = join(remote.ftpd.dataDir, 'links');
    await mkdir(join(dir, 'sub'), { recursive: true });
    await writeFile(join(dir, 'sub', 'inner.txt'), 'inner');
    await writeFile(join(dir, 'big.bin'), Buffer.alloc(10_000, 1));
    await symlink('sub', join(dir, 'subdir-link'));
    await symlink('big.bin', join(dir, 'big-link'));
    const r = await fsList('/ftp/links');
    ok(r);
    const by = Object.fromEntries(r.data!.content!.map((e) => [e.name, { size: e.size, is_dir: e.is_dir }]));
    expect(by['subdir-link']).toEqual({ size: 0, is_dir: true });
    expect(by['big-link']).toEqual({ size: 10_000, is_dir: false });
    const inner = await fsList('/ftp/links/subdir-link');
    ok(inner);
    expect(inner.data!.content!.map((e) => e.name)).toEqual(['inner.txt']);
    const g = await fsGet('/ftp/links/big-link');
    ok(g);
    expect(g.data!.size).toBe(10_000);
  });

  it('removing a link to a folder removes the link, not what the folder holds', async () => {
    const dir = join(remote.ftpd.dataDir, 'links2');
    await mkdir(join(dir, 'keep'), { recursive: true });
    await writeFile(join(dir, 'keep', 'precious.txt'), 'precious');
    await symlink('keep', join(dir, 'keep-link'));
    const { uid, gid } = await stat(remote.ftpd.dataDir); // the FTP user may write there
    for (const p of [dir, join(dir, 'keep'), join(dir, 'keep', 'precious.txt')]) await chown(p, uid, gid);
    await lchown(join(dir, 'keep-link'), uid, gid);
    ok(await ts.api('/api/fs/remove', { token: admin, body: { dir: '/ftp/links2', names: ['keep-link'] } }));
    expect(await readdir(dir)).toEqual(['keep']);
    expect(await readFile(join(dir, 'keep', 'precious.txt'), 'utf8')).toBe('precious');
  });
});

describe('FTP: a folder the FTP user may not enter', () => {
  it('listing it is refused (403), not "object not found" for a folder its parent lists', async () => {
    const dir = join(remote.ftpd.dataDir, 'locked');
    await mkdir(dir);
    await writeFile(join(dir, 'secret.txt'), 'x');
    await chmod(dir, 0o700); // owned by root: the FTP user can neither list nor enter it
    const parent = await fsList('/ftp');
    ok(parent);
    expect(parent.data!.content!.find((e) => e.name === 'locked')?.is_dir).toBe(true);
    const r = await fsList('/ftp/locked');
    expect(r.code).toBe(403);
  });
});

/** A TCP proxy to 127.0.0.1:`target` that delays every chunk from the server by `ms` (a slow link), in order. */
async function slowLink(target: number, ms: number): Promise<{ port: number; close(): void }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    for (const x of [client, upstream]) {
      sockets.add(x);
      x.on('error', () => { client.destroy(); upstream.destroy(); });
    }
    client.pipe(upstream);
    let last = Promise.resolve();
    upstream.on('data', (chunk: Buffer) => {
      last = last.then(() => new Promise((r) => setTimeout(r, ms))).then(() => void (client.destroyed || client.write(chunk)));
    });
    upstream.on('end', () => void last.then(() => client.end()));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { port: (server.address() as net.AddressInfo).port, close: () => { for (const x of sockets) x.destroy(); server.close(); } };
}

describe('SFTP: listing a large folder over a slow link', () => {
  it('the request deadline is per request: a listing of many READDIR round trips is not cut at the deadline', async () => {
    const dir = join(remote.sshd.dataDir, 'many');
    await mkdir(dir);
    const N = 5_000;
    for (let i = 0; i < N; i += 1000) {
      await Promise.all(Array.from({ length: 1000 }, (_, j) => writeFile(join(dir, `entry-with-a-longish-name-${i + j}.txt`), '')));
    }
    // OpenSSH answers a READDIR with at most 100 entries: 50 round trips of 40 ms or more each,
    // against a deadline of 1 s (far above one round trip, below all of them). A storage of its
    // own (in this process), to shorten its deadline.
    const link = await slowLink(remote.sshd.port, 40);
    const def = sftpDefinition as unknown as DriverDefinition;
    const d = await def.create(parseOptions(def, additionFor.SFTP(remote.sshd, link.port)), { log: pino({ level: 'silent' }) } as never);
    try {
      await d.init(AbortSignal.timeout(30_000));
      (d as unknown as { conn: { requestTimeoutMs: number } }).conn.requestTimeoutMs = 1000;
      const got = await d.list({ name: 'many', path: '/many', size: 0, isDir: true, modified: new Date(0) }, {});
      expect(got.length).toBe(N);
    } finally {
      await d.drop();
      link.close();
    }
  }, 120_000);
});

describe('SFTP: a server that refuses to set times (internal-sftp -P setstat,fsetstat)', () => {
  it('an upload with a modification time lands and succeeds, keeping its upload time (it failed once the file had landed)', async () => {
    const sshd = await startSshd({ sftpFlags: '-P setstat,fsetstat' });
    try {
      ok(await createStorage(ts, admin, '/sftp-notimes', 'SFTP', additionFor.SFTP(sshd)));
      ok(await putFile(ts, admin, '/sftp-notimes/dated.txt', 'dated', { 'last-modified': '1600000000000' }));
      expect(await readFile(join(sshd.dataDir, 'dated.txt'), 'utf8')).toBe('dated');
      expect((await stat(join(sshd.dataDir, 'dated.txt'))).mtimeMs).toBeGreaterThan(1600000000000 + 86_400_000);
      // Nothing else is left in the folder (no temp file).
      expect(await readdir(sshd.dataDir)).toEqual(['dated.txt']);
    } finally {
      await sshd.stop();
    }
  }, 60_000);
});
