/**
 * Code review of live sessions and revocation across REST, WebDAV and SFTP: each test proves one
 * defect found by reading src/auth and the protocols' auth code, against a real server on loopback.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdir, readdir } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { connect as tcpConnect, createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { createUser } from './auth-helpers.js';
import { PERM } from './fs-helpers.js';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';

let ts: TestServer | undefined;
afterEach(async () => {
  await ts?.close();
  ts = undefined;
});

/** One PROPFIND on a connection of its own (no keep-alive socket that already knows a credential). */
function propfind(s: TestServer, user: string, password: string, headers: Record<string, string> = {}, agent: Agent | false = false): Promise<number> {
  return propfindOn(s, user, password, headers, agent).then((r) => r.status);
}

/** propfind() with the local port of the socket it went over (a keep-alive agent reuses one). */
function propfindOn(s: TestServer, user: string, password: string, headers: Record<string, string>, agent: Agent | false): Promise<{ status: number; port: number }> {
  const u = new URL(s.url);
  const authorization = 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64');
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: '/dav/', method: 'PROPFIND', agent, headers: { authorization, depth: '0', ...headers } }, (res) => {
      const port = res.socket.localPort ?? 0;
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, port }));
      res.on('error', reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error('PROPFIND: timeout')));
    req.on('error', reject);
    req.end();
  });
}

describe('the WebDAV credential cache and the login throttle', () => {
  it('refuses a locked-out client the right password even while another client keeps it cached', async () => {
    ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false', TREEGATE_TRUSTED_PROXIES: '127.0.0.1' } });
    const victim = { 'x-forwarded-for': '198.51.100.8' };
    const attacker = { 'x-forwarded-for': '198.51.100.7' };
    // The admin's WebDAV client is active: its credential sits in the verified-credential cache.
    expect(await propfind(ts, 'admin', ADMIN_PASSWORD, victim)).toBe(207);
    // Another client guesses until its address is locked out.
    for (let i = 0; i < 5; i++) expect(await propfind(ts, 'admin', `guess-${i}`, attacker)).toBe(401);
    expect(await propfind(ts, 'admin', 'guess-5', attacker)).toBe(429);
    // A locked-out client must not learn that a guess is right: the cached answer let it in (207),
    // so every wrong guess cost it a 429 and no scrypt, and the right one showed as a 207.
    expect(await propfind(ts, 'admin', ADMIN_PASSWORD, attacker)).toBe(429);
    // The owner of the credential, at another address, goes on.
    expect(await propfind(ts, 'admin', ADMIN_PASSWORD, victim)).toBe(207);
  });

  it('refuses it too on a pooled proxy connection where that credential was verified for another client', async () => {
    ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false', TREEGATE_TRUSTED_PROXIES: '127.0.0.1' } });
    // A reverse proxy with upstream keep-alive: one connection carries the requests of both clients.
    const pool = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const victim = { 'x-forwarded-for': '198.51.100.8' };
      const attacker = { 'x-forwarded-for': '198.51.100.7' };
      const first = await propfindOn(ts, 'admin', ADMIN_PASSWORD, victim, pool);
      expect(first.status).toBe(207);
      for (let i = 0; i < 5; i++) expect(await propfind(ts, 'admin', `guess-${i}`, attacker, pool)).toBe(401);
      expect(await propfind(ts, 'admin', 'guess-5', attacker, pool)).toBe(429);
      const right = await propfindOn(ts, 'admin', ADMIN_PASSWORD, attacker, pool);
      expect(right.port).toBe(first.port); // the same connection all along
      expect(right.status).toBe(429);
      expect(await propfind(ts, 'admin', ADMIN_PASSWORD, victim, pool)).toBe(207);
    } finally {
      pool.destroy();
    }
  });
});

/** One ssh2 SFTP connection with promise wrappers for the calls an upload makes. */
async function sftpLogin(s: TestServer, username: string, password: string) {
  const client = new ssh2.Client();
  client.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('error', reject);
    client.connect({ host: '127.0.0.1', port: s.sftpPort, username, password, readyTimeout: 20_000 });
  });
  const sftp = await new Promise<ssh2.SFTPWrapper>((resolve, reject) => client.sftp((e, w) => (e ? reject(e) : resolve(w))));
  return {
    open: (p: string, flags: ssh2.OpenMode) => new Promise<Buffer>((resolve, reject) => sftp.open(p, flags, (e, h) => (e ? reject(e) : resolve(h)))),
    write: (h: Buffer, data: string, pos: number) =>
      new Promise<void>((resolve, reject) => sftp.write(h, Buffer.from(data), 0, data.length, pos, (e) => (e ? reject(e) : resolve()))),
    /** CLOSE's status: 'ok' or the error's code (ssh2 STATUS_CODE). */
    close: (h: Buffer) => new Promise<number | 'ok'>((resolve) => sftp.close(h, (e) => resolve(e ? ((e as { code?: number }).code ?? -1) : 'ok'))),
    end: () => client.end(),
  };
}

describe('an SFTP upload open while its user loses the right to write there', () => {
  const RW = PERM.SFTP_READ | PERM.SFTP_MANAGE | PERM.WRITE;
  const DENIED = ssh2.utils.sftp.STATUS_CODE.PERMISSION_DENIED;
  const update = async (s: TestServer, admin: string, body: Record<string, unknown>) =>
    expect(await s.api('/api/admin/user/update', { token: admin, body })).toMatchObject({ code: 200 });

  it.each([
    ['the write bit removed', { permission: PERM.SFTP_READ | PERM.SFTP_MANAGE }],
    ['the SFTP manage bit removed', { permission: PERM.SFTP_READ | PERM.WRITE }],
    ['base_path moved to a subfolder', { base_path: '/inner' }],
  ])('does not land at CLOSE after this change: %s', async (_what, change) => {
    ts = await startTestServer();
    const admin = await ts.login();
    await mkdir(join(ts.dataDir, 'storage', 'inner'));
    const id = await createUser(ts, admin, { username: 'uma', password: 'uma-pass-1', permission: RW });
    const c = await sftpLogin(ts, 'uma', 'uma-pass-1');
    try {
      const h = await c.open('/report.txt', 'w');
      await c.write(h, 'before', 0);
      // The connection stays open (the password is unchanged): only the right to write goes.
      await update(ts, admin, { id, username: 'uma', ...change });
      // Its WRITEs had no check of their own (vfs.put checked once, at OPEN), and CLOSE landed the
      // file the user may no longer write: the upload went on for as long as the client liked.
      await c.write(h, '-after', 6).catch(() => undefined);
      expect(await c.close(h)).toBe(DENIED);
      expect(await readdir(join(ts.dataDir, 'storage'))).toEqual(['inner']);
      expect(await readdir(join(ts.dataDir, 'storage', 'inner'))).toEqual([]);
    } finally {
      c.end();
    }
  });
});

/**
 * A TCP relay to the SFTP port that never passes a close on to the server: the client end of a
 * connection that ignores the server's FIN (a stuck or hostile client), seen from the server.
 */
async function neverClosingRelay(port: number) {
  const upstreams = new Set<Socket>();
  const relay = createServer({ allowHalfOpen: true }, (down) => {
    const up = tcpConnect({ host: '127.0.0.1', port, allowHalfOpen: true });
    upstreams.add(up);
    down.on('data', (b: Buffer) => up.write(b));
    up.on('data', (b: Buffer) => (down.writable ? down.write(b) : undefined));
    up.on('end', () => down.end()); // the server's FIN reaches the client, but never the other way
    for (const sock of [down, up]) sock.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  return {
    port: (relay.address() as AddressInfo).port,
    close: () => {
      for (const u of upstreams) u.destroy();
      relay.close();
    },
  };
}

describe('SFTP connections of a revoked login', () => {
  it('do not keep the user out once the client leaves them half-open', async () => {
    ts = await startTestServer();
    const admin = await ts.login();
    const PERMS = PERM.SFTP_READ | PERM.SFTP_MANAGE | PERM.WRITE;
    const id = await createUser(ts, admin, { username: 'vic', password: 'stolen-pass-1', permission: PERMS });
    const relay = await neverClosingRelay(ts.sftpPort);
    const viaRelay = { ...ts, sftpPort: relay.port } as TestServer;
    try {
      // Someone with the stolen password holds the most connections one user may have (64).
      const held = [];
      for (let i = 0; i < 64; i++) held.push(await sftpLogin(viaRelay, 'vic', 'stolen-pass-1'));
      // The admin changes the password: every one of those logins is revoked and told to close.
      expect(await ts.api('/api/admin/user/update', { token: admin, body: { id, username: 'vic', password: 'new-pass-2' } })).toMatchObject({ code: 200 });
      for (const c of held) c.end();
      // The server only half-closed them (ssh2's end()): they stayed open, counted against the user,
      // and the user could not log in with the new password (each new connection was closed at once,
      // for good). Now they are cut off after a short grace.
      let opened: string | undefined;
      for (let i = 0; i < 20 && opened === undefined; i++) {
        await new Promise((r) => setTimeout(r, 500));
        opened = await sftpLogin(ts, 'vic', 'new-pass-2').then(
          async (c) => {
            const h = await c.open('/probe.txt', 'w').then(() => 'in', () => undefined);
            c.end();
            return h;
          },
          () => undefined,
        );
      }
      expect(opened).toBe('in');
    } finally {
      relay.close();
    }
  });
});
