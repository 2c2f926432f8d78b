/**
 * Code-review probe of the remote drivers through the whole server, against real servers on
 * loopback: each test proves one defect found by reading the driver (SFTP copy, WebDav ranges).
 */
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { createStorage, startRemoteServers, type RemoteServers } from './remote-servers.js';
import { freePort, proxyTo, startServer, type Server } from '../drivers/testing/process.js';
import { sftpDefinition } from '../drivers/sftp/index.js';
import { parseOptions } from '../drivers/options.js';
import type { Driver, DriverDefinition } from '../drivers/types.js';
import pino from 'pino';

let ts: TestServer;
let admin: string;
let remote: RemoteServers<'SFTP' | 'WebDav' | 'FTP'>;
let outside: string;
let proxy: RangeStripper;
let noLinks: Server;
const davAuth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

/** What the proxy did with one GET: resolves when its answer to treegate closes. */
interface ProxiedGet { closed: Promise<{ finished: boolean; sent: number }> }

/** A WebDAV server that ignores Range (as some do): a proxy in front of nginx that drops the header. */
interface RangeStripper { port: number; gets: ProxiedGet[]; close(): Promise<void> }

async function startRangeStripper(target: number): Promise<RangeStripper> {
  const gets: ProxiedGet[] = [];
  const server = http.createServer((req, res) => {
    const headers = { ...req.headers };
    delete headers.range;
    let sent = 0;
    if (req.method === 'GET') gets.push({ closed: new Promise((r) => res.once('close', () => r({ finished: res.writableFinished, sent }))) });
    const up = http.request({ host: '127.0.0.1', port: target, method: req.method, path: req.url, headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.on('data', (c: Buffer) => { sent += c.length; });
      ur.pipe(res);
      res.once('close', () => ur.destroy());
    });
    up.once('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port, gets,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

beforeAll(async () => {
  remote = await startRemoteServers(['SFTP', 'WebDav', 'FTP'] as const);
  proxy = await startRangeStripper(remote.dav.port);
  ts = await startRestServer();
  admin = await ts.login();
  ok(await createStorage(ts, admin, '/sftp', 'SFTP', remote.additionOf('SFTP')));
  ok(await createStorage(ts, admin, '/dav-norange', 'WebDav', remote.additionOf('WebDav', proxy.port)));
  ok(await createStorage(ts, admin, '/webdav', 'WebDav', remote.additionOf('WebDav')));
  ok(await createStorage(ts, admin, '/ftp', 'FTP', remote.additionOf('FTP')));
  outside = await mkdtemp(join(tmpdir(), 'tg-outside-'));
  // The same sshd setup, but its SFTP server refuses SYMLINK requests (internal-sftp -P symlink).
  const dir = join(remote.sshd.dataDir, '..');
  const port = await freePort();
  const cfg = (await readFile(join(dir, 'sshd_config'), 'utf8')).replace(/^Port \d+$/m, `Port ${port}`).replace(/^Subsystem sftp internal-sftp$/m, 'Subsystem sftp internal-sftp -P symlink');
  await writeFile(join(dir, 'sshd_config_nolinks'), cfg);
  await mkdir(join(remote.sshd.dataDir, 'nl'));
  noLinks = await startServer('/usr/sbin/sshd', ['-D', '-e', '-f', join(dir, 'sshd_config_nolinks')], port);
  ok(await createStorage(ts, admin, '/sftp-nolinks', 'SFTP', { ...remote.additionOf('SFTP', port), root_folder_path: join(remote.sshd.dataDir, 'nl') }));
}, 60_000);

afterAll(async () => {
  await ts?.close();
  await noLinks?.stop();
  await proxy?.close();
  await remote?.stop();
  if (outside) await rm(outside, { recursive: true, force: true });
});

const fsCall = (op: string, body: unknown) => ts.api(`/api/fs/${op}`, { token: admin, body });

describe('SFTP: copying a folder that holds symlinks', () => {
  it('copies a link to a file or folder outside the root as a link, never the bytes it points to', async () => {
    await writeFile(join(outside, 'secret.txt'), 'outside the storage root');
    await mkdir(join(outside, 'dir'));
    await writeFile(join(outside, 'dir', 'inner.txt'), 'also outside');
    const tree = join(remote.sshd.dataDir, 'lnk', 'tree');
    await mkdir(tree, { recursive: true });
    await mkdir(join(remote.sshd.dataDir, 'lnk-dst'));
    await writeFile(join(tree, 'a.txt'), 'a');
    await symlink(join(outside, 'secret.txt'), join(tree, 'to-file'));
    await symlink(join(outside, 'dir'), join(tree, 'to-dir'));
    ok(await fsCall('copy', { src_dir: '/sftp/lnk', dst_dir: '/sftp/lnk-dst', names: ['tree'] }));
    const copied = join(remote.sshd.dataDir, 'lnk-dst', 'tree');
    for (const [name, target] of [['to-file', join(outside, 'secret.txt')], ['to-dir', join(outside, 'dir')]] as const) {
      expect((await lstat(join(copied, name))).isSymbolicLink()).toBe(true);
      expect(await readlink(join(copied, name))).toBe(target);
    }
    expect((await lstat(join(copied, 'a.txt'))).isFile()).toBe(true);
  });

  it('a link to its own folder (a loop) is copied as a link, not followed until the path is too long', async () => {
    const tree = join(remote.sshd.dataDir, 'loop', 'tree');
    await mkdir(tree, { recursive: true });
    await mkdir(join(remote.sshd.dataDir, 'loop-dst'));
    await writeFile(join(tree, 'a.txt'), 'a');
    await symlink('.', join(tree, 'self'));
    ok(await fsCall('copy', { src_dir: '/sftp/loop', dst_dir: '/sftp/loop-dst', names: ['tree'] }));
    const copied = join(remote.sshd.dataDir, 'loop-dst', 'tree');
    expect(await readlink(join(copied, 'self'))).toBe('.');
  }, 120_000);

  it('a server that refuses to make links: the link is left out (and logged), the rest is copied', async () => {
    const tree = join(remote.sshd.dataDir, 'nl', 'tree');
    await mkdir(tree);
    await mkdir(join(remote.sshd.dataDir, 'nl', 'dst'));
    await writeFile(join(tree, 'a.txt'), 'a');
    await symlink(join(outside, 'secret.txt'), join(tree, 'to-file'));
    ok(await fsCall('copy', { src_dir: '/sftp-nolinks', dst_dir: '/sftp-nolinks/dst', names: ['tree'] }));
    expect(await readdir(join(remote.sshd.dataDir, 'nl', 'dst', 'tree'))).toEqual(['a.txt']);
    expect(ts.logs.some((l) => l.includes('a symlink in a copied folder was not copied'))).toBe(true);
  });
});

/** GET through treegate's /dav with a Range header. */
function davGet(path: string, range: string): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${ts.url}/dav${path}`, { headers: { authorization: davAuth, range } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
      res.once('error', reject);
    });
    req.once('error', reject);
    req.end();
  });
}

describe('WebDav: an upstream that ignores Range (answers 200 with the whole file)', () => {
  it('serves exactly the asked bytes, and stops reading the upstream once they are sent', async () => {
    const big = randomBytes(32 << 20); // far past every socket buffer on the way
    ok(await putFile(ts, admin, '/dav-norange/big.bin', big));
    const mid = await davGet('/dav-norange/big.bin', 'bytes=1000-1999');
    expect(mid.status).toBe(206);
    expect(mid.body.equals(big.subarray(1000, 2000))).toBe(true);
    const tail = await davGet('/dav-norange/big.bin', `bytes=${big.length - 10}-`);
    expect(tail.body.equals(big.subarray(big.length - 10))).toBe(true);
    // The first bytes of a 32 MiB file: the rest of it must not be pulled from the upstream.
    const before = proxy.gets.length;
    const head = await davGet('/dav-norange/big.bin', 'bytes=0-9');
    expect(head.body.equals(big.subarray(0, 10))).toBe(true);
    const upstream = await proxy.gets[before]!.closed;
    expect(upstream.finished).toBe(false);
  }, 60_000);
});

/** A TCP proxy to `target` that holds every new connection until `open()`. */
async function gateProxy(target: number) {
  const sockets = new Set<net.Socket>();
  const held: net.Socket[] = [];
  const pipeTo = proxyTo(target, sockets);
  let opened = false;
  const server = net.createServer((c) => { if (opened) pipeTo(c); else held.push(c); });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port, held,
    open: () => { opened = true; for (const c of held.splice(0)) pipeTo(c); },
    close: () => new Promise<void>((r) => { for (const s of [...sockets, ...held]) s.destroy(); server.close(() => r()); }),
  };
}

describe('SFTP: one caller giving up while the connection is being made', () => {
  it('fails only that caller; another one waiting for the same connection gets its answer', async () => {
    const gate = await gateProxy(remote.sshd.port);
    const def = sftpDefinition as unknown as DriverDefinition;
    const opts = parseOptions(def, { ...remote.additionOf('SFTP', gate.port) });
    const d = await def.create(opts, { log: pino({ level: 'silent' }), dataDir: '/x' }) as Required<Driver>;
    try {
      const ac = new AbortController();
      const leaving = d.get('/', { signal: ac.signal }).then(() => 'answered', () => 'failed');
      const staying = d.get('/', {}).then(() => 'answered', (e: Error) => `failed: ${e.message}`);
      for (let i = 0; i < 200 && !gate.held.length; i++) await new Promise((r) => setTimeout(r, 10));
      expect(gate.held.length).toBe(1); // both wait on the one connection being made
      ac.abort(); // e.g. a REST client that went away
      await new Promise((r) => setImmediate(r));
      gate.open();
      expect(await leaving).toBe('failed');
      expect(await staying).toBe('answered');
    } finally {
      await d.drop();
      await gate.close();
    }
  });
});

describe('SFTP, WebDav, FTP: a name of the form the drivers give upload temp files', () => {
  // Listings leave such names out (they are uploads in progress): an entry created under one was
  // reported created, then never shown. The Local driver refuses them as reserved; so must these.
  it.each(['/sftp', '/webdav', '/ftp'])('%s: upload, mkdir and rename to it are refused (400), nothing is made', async (mount) => {
    const reserved = '.notes.txt.tg-abcd1234.tmp';
    ok(await fsCall('mkdir', { path: `${mount}/reserved` }));
    const put = await putFile(ts, admin, `${mount}/reserved/${reserved}`, 'x');
    const made = await fsCall('mkdir', { path: `${mount}/reserved/.d.tg-abcd1234.tmp` });
    ok(await putFile(ts, admin, `${mount}/reserved/plain.txt`, 'y'));
    const renamed = await fsCall('rename', { path: `${mount}/reserved/plain.txt`, name: `.p.tg-x1.tmp` });
    expect([put.code, made.code, renamed.code]).toEqual([400, 400, 400]);
    const host = { '/sftp': remote.sshd.dataDir, '/webdav': remote.dav.dataDir, '/ftp': remote.ftpd.dataDir }[mount]!;
    expect(await readdir(join(host, 'reserved'))).toEqual(['plain.txt']);
  });
});
