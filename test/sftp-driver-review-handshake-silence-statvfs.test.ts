/**
 * Code review of the remote drivers' connection management (SFTP, FTP, WebDav), through the whole
 * server against the real remote servers on loopback, some behind a test proxy. Each test proves
 * one defect found by reading the drivers.
 *
 * Checked and found sound (no test kept): FTP passive mode connects to the control connection's
 * host whatever address PASV names (basic-ftp's default, kept); the FTP pool hands each job a
 * connection of its own and downloads and uploads dial their own, so parallel transfers never share
 * a control connection; a WebDav redirect to another origin goes without the Authorization header;
 * a storage disabled while a download is in flight drains it first, by design (mounts.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { request, type IncomingMessage } from 'node:http';
import net from 'node:net';
import { dirname, join } from 'node:path';
import pino from 'pino';
import { Server as SshServer, utils as sshUtils, type Connection } from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseOptions } from '../drivers/options.js';
import { sftpDefinition } from '../drivers/sftp/index.js';
import { startSshd } from '../drivers/testing/sshd.js';
import type { DriverDefinition, Link, Obj } from '../drivers/types.js';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { additionFor, createStorage, startRemoteServers, type RemoteServers } from './remote-servers.js';

let ts: TestServer;
let admin: string;
let remote: RemoteServers<'SFTP'>;
const davAuth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

beforeAll(async () => {
  remote = await startRemoteServers(['SFTP'] as const);
  ts = await startRestServer();
  admin = await ts.login();
}, 60_000);

afterAll(async () => {
  await ts?.close();
  await remote?.stop();
});

/** `p`, or a rejection after `ms`: a call that would hang fails the test instead. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => { t = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(t));
}

/**
 * A loopback TCP proxy to `target` that counts its open connections. In `cut` mode a new
 * connection gets the server's first bytes and is then closed (the link dropped mid-handshake).
 */
interface Proxy {
  port: number;
  mode: 'pass' | 'cut';
  /** Connections open from treegate to the proxy. */
  open(): number;
  cutAll(): void;
  close(): void;
}

async function proxy(target: number): Promise<Proxy> {
  const sockets = new Set<net.Socket>();
  const p = { mode: 'pass' } as Proxy;
  const server = net.createServer((client) => {
    const up = net.connect(target, '127.0.0.1');
    const cut = p.mode === 'cut';
    for (const s of [client, up]) {
      sockets.add(s);
      s.on('error', () => { client.destroy(); up.destroy(); });
      s.on('close', () => { sockets.delete(s); client.destroy(); up.destroy(); });
    }
    up.on('data', (d: Buffer) => {
      if (!cut) return void client.write(d);
      client.end(d);
      up.destroy();
    });
    client.on('data', (d: Buffer) => up.write(d));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return Object.assign(p, {
    port: (server.address() as net.AddressInfo).port,
    open: () => [...sockets].filter((s) => s.remotePort !== target).length,
    cutAll: () => { for (const s of sockets) s.destroy(); },
    close: () => { for (const s of sockets) s.destroy(); server.close(); },
  });
}

const list = (path: string) => ts.api<{ content: Array<{ name: string }> }>('/api/fs/list', { token: admin, body: { path, refresh: true } });

describe('SFTP: the connection drops during the SSH handshake', () => {
  it('the request fails instead of hanging, and the storage reconnects once the link is back (it hung for good)', async () => {
    await writeFile(join(remote.sshd.dataDir, 'here.txt'), 'x');
    const px = await proxy(remote.sshd.port);
    try {
      ok(await createStorage(ts, admin, '/sftp-cut', 'SFTP', remote.additionOf('SFTP', px.port)));
      // The live connection drops, and the next dials lose the link after the server's banner.
      px.mode = 'cut';
      px.cutAll();
      const r = await within(list('/sftp-cut'), 20_000, 'list while the link drops mid-handshake');
      expect(r.code).not.toBe(200);
      px.mode = 'pass';
      const back = await within(list('/sftp-cut'), 20_000, 'list once the link is back');
      ok(back);
      expect(back.data!.content.map((e) => e.name)).toContain('here.txt');
    } finally {
      px.close();
    }
  }, 60_000);
});

describe('SFTP: the server takes the login but never answers the SFTP channel', () => {
  it('the dial fails at the request deadline, and the storage works again once the server does (it waited forever)', async () => {
    await writeFile(join(remote.sshd.dataDir, 'here.txt'), 'x');
    // The key's forced command runs instead of the sftp subsystem: a session that never says VERSION.
    const keys = join(dirname(remote.sshd.dataDir), 'authorized_keys');
    const key = await readFile(keys, 'utf8');
    const px = await proxy(remote.sshd.port);
    // A storage of its own (in this process), to shorten its request deadline.
    const def = sftpDefinition as unknown as DriverDefinition;
    const d = await def.create(parseOptions(def, additionFor.SFTP(remote.sshd, px.port)), { log: pino({ level: 'silent' }) } as never);
    const root: Obj = { name: '', path: '/', size: 0, isDir: true, modified: new Date(0) };
    try {
      await d.init(AbortSignal.timeout(20_000));
      (d as unknown as { conn: { requestTimeoutMs: number } }).conn.requestTimeoutMs = 1000;
      await writeFile(keys, `command="sleep 20" ${key}`);
      px.cutAll(); // the next call dials again, into the silent session
      await expect(within(d.list(root, {}), 15_000, 'list on a silent SFTP session')).rejects.toMatchObject({ code: 'UPSTREAM' });
      await writeFile(keys, key);
      const names = (await within(d.list(root, {}), 15_000, 'list once the server answers')).map((o) => o.name);
      expect(names).toContain('here.txt');
    } finally {
      await writeFile(keys, key);
      await d.drop();
      px.close();
    }
  }, 60_000);
});

/**
 * A plain SFTP server (ssh2's own, as Node-based servers are) over `file`, one folder `/` holding
 * `big.bin`: its VERSION advertises no extension, as many servers other than OpenSSH (statvfs@openssh.com
 * among them). Counts the connections it took.
 */
async function plainSftp(file: Buffer): Promise<{ port: number; connections: number; close(): void }> {
  const { STATUS_CODE } = sshUtils.sftp;
  const clients = new Set<Connection>();
  const now = Math.floor(Date.now() / 1000);
  const dir = { mode: 0o040755, uid: 0, gid: 0, size: 0, atime: now, mtime: now };
  const reg = { ...dir, mode: 0o100644, size: file.length };
  const out = { port: 0, connections: 0, close: () => { for (const c of clients) c.end(); server.close(); } };
  const server = new SshServer({ hostKeys: [sshUtils.generateKeyPairSync('ed25519').private] }, (client) => {
    out.connections++;
    clients.add(client);
    client.on('error', () => undefined).on('close', () => clients.delete(client));
    client.on('authentication', (ctx) => ctx.accept());
    client.on('ready', () => client.on('session', (accept) => accept().on('sftp', (acceptSftp) => {
      const sftp = acceptSftp();
      const stat = (id: number, path: string) => {
        if (path === '/' || path === '/.') return void sftp.attrs(id, dir);
        if (path === '/big.bin') return void sftp.attrs(id, reg);
        sftp.status(id, STATUS_CODE.NO_SUCH_FILE);
      };
      sftp.on('STAT', stat).on('LSTAT', stat);
      sftp.on('REALPATH', (id) => sftp.name(id, [{ filename: '/', longname: '/', attrs: dir }]));
      sftp.on('OPEN', (id, path) => (path === '/big.bin' ? sftp.handle(id, Buffer.from('f')) : sftp.status(id, STATUS_CODE.NO_SUCH_FILE)));
      sftp.on('READ', (id, _h, offset, length) => {
        if (offset >= file.length) return void sftp.status(id, STATUS_CODE.EOF);
        sftp.data(id, file.subarray(offset, offset + length));
      });
      sftp.on('CLOSE', (id) => sftp.status(id, STATUS_CODE.OK));
    })));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  out.port = (server.address() as net.AddressInfo).port;
  return out;
}

/** Open a WebDAV GET on treegate and read its first chunk; the response is left paused. */
function startGet(path: string): Promise<{ res: IncomingMessage; first: number }> {
  return new Promise((resolve, reject) => {
    const req = request(`${ts.url}/dav${path}`, { headers: { authorization: davAuth } }, (res) => {
      res.once('data', (c: Buffer) => { res.pause(); resolve({ res, first: c.length }); });
      res.once('error', reject);
    });
    req.once('error', reject);
    req.end();
  });
}

describe('SFTP: a server without the statvfs@openssh.com extension', () => {
  it('asking the storage\'s quota does not drop its connection: a download in flight completes (it was cut)', async () => {
    const file = Buffer.alloc(64 << 20, 7);
    const srv = await plainSftp(file);
    try {
      ok(await createStorage(ts, admin, '/plain', 'SFTP', { address: `127.0.0.1:${srv.port}`, username: 'u', password: 'p', root_folder_path: '/' }));
      const { res, first } = await within(startGet('/plain/big.bin'), 20_000, 'download start');
      let got = first;
      res.on('data', (c: Buffer) => { got += c.length; });
      const ended = new Promise<boolean>((resolve) => { res.once('end', () => resolve(true)); res.once('error', () => resolve(false)); res.once('aborted', () => resolve(false)); });
      // A WebDAV client asking the folder's quota (Finder, Windows): treegate asks the storage's usage.
      const pf = await fetch(`${ts.url}/dav/plain/`, {
        method: 'PROPFIND', headers: { authorization: davAuth, depth: '0', 'content-type': 'application/xml' },
        body: '<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:quota-available-bytes/></D:prop></D:propfind>',
      });
      expect(pf.status).toBe(207);
      await pf.text();
      res.resume();
      expect(await within(ended, 30_000, 'download end')).toBe(true);
      expect(got).toBe(file.length);
      // Still the one connection: it was dropped and dialled again.
      expect(srv.connections).toBe(1);
    } finally {
      srv.close();
    }
  }, 60_000);
});

/** The processes under `pid` whose command line holds `what` (e.g. sshd's internal-sftp child of a session). */
function descendants(pid: number, what: string): number[] {
  const kids = new Map<number, number[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]);
      kids.set(ppid, [...(kids.get(ppid) ?? []), Number(d)]);
    } catch { /* gone meanwhile */ }
  }
  const out: number[] = [];
  const walk = (p: number, depth: number): void => {
    for (const k of depth < 8 ? kids.get(p) ?? [] : []) {
      try { if (readFileSync(`/proc/${k}/cmdline`, 'utf8').includes(what)) out.push(k); } catch { /* gone */ }
      walk(k, depth + 1);
    }
  };
  walk(pid, 0);
  return out;
}

describe('SFTP: the server stops answering the READs of a download (sftp-server stuck, sshd alive)', () => {
  it('the download fails at the request deadline and the storage works again (it waited for good)', async () => {
    const sshd = await startSshd();
    const file = Buffer.alloc(64 << 20, 7);
    await writeFile(join(sshd.dataDir, 'big.bin'), file);
    // A storage of its own (in this process), to shorten its request deadline.
    const def = sftpDefinition as unknown as DriverDefinition;
    const d = await def.create(parseOptions(def, additionFor.SFTP(sshd)), { log: pino({ level: 'silent' }) } as never);
    const stopped: number[] = [];
    try {
      await d.init(AbortSignal.timeout(20_000));
      (d as unknown as { conn: { requestTimeoutMs: number } }).conn.requestTimeoutMs = 1000;
      const obj = await d.get!('/big.bin', {});
      const link = (await d.link(obj, {})) as Extract<Link, { kind: 'range' }>;
      const rs = await link.open(undefined);
      const it = rs[Symbol.asyncIterator]();
      await it.next();
      // The session's sftp server stops (as one blocked on its disk); sshd still answers keepalives.
      stopped.push(...descendants(sshd.server.pid, 'internal-sftp'));
      expect(stopped.length).toBe(1);
      for (const p of stopped) process.kill(p, 'SIGSTOP');
      const drain = (async () => { for (let r = await it.next(); !r.done; r = await it.next()); })();
      await expect(within(drain, 15_000, 'download from a stopped sftp server')).rejects.toMatchObject({ code: 'UPSTREAM' });
      for (const p of stopped.splice(0)) process.kill(p, 'SIGKILL');
      expect((await within(d.list({ name: '', path: '/', size: 0, isDir: true, modified: new Date(0) }, {}), 15_000, 'list after')).map((o) => o.name)).toContain('big.bin');
    } finally {
      for (const p of stopped) process.kill(p, 'SIGKILL');
      await d.drop();
      await sshd.stop();
    }
  }, 60_000);
});
