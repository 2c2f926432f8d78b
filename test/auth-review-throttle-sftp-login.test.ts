/**
 * Review of authentication and accounts: defects found by reading src/auth/* and the protocol
 * adapters, each shown here against a real server before it was fixed.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { createUser } from './auth-helpers.js';
import { PERM } from './fs-helpers.js';
import { makeKey, requireSftpTools, runSftp } from './clients/sftp.js';
import { smallDisk, type SmallDisk } from './small-disk.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('login throttle behind a trusted proxy: IPv4 clients through NAT64 / SIIT (64:ff9b::/96)', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false', TREEGATE_TRUSTED_PROXIES: '127.0.0.1' } });
  });
  afterAll(async () => {
    await s?.close();
  });
  const login = (password: string, client: string) =>
    s.api('/api/auth/login', { body: { username: 'admin', password }, headers: { 'x-forwarded-for': client } });

  it('counts each IPv4 client on its own, in the hex spelling a socket and a proxy report', async () => {
    // 192.0.2.1 as an IPv6-only server sees it (inet_ntop writes the last 32 bits in hex).
    const codes: number[] = [];
    for (let i = 0; i < 6; i++) codes.push((await login(`guess-${i}`, '64:ff9b::c000:201')).code);
    expect(codes).toEqual([400, 400, 400, 400, 400, 429]);
    // Another IPv4 client (192.0.2.2) behind the same translator is not locked out by the first.
    expect((await login(ADMIN_PASSWORD, '64:ff9b::c000:202')).code).toBe(200);
    // The dotted spelling of the locked client is that client.
    expect((await login(ADMIN_PASSWORD, '64:ff9b::192.0.2.1')).code).toBe(429);
  });
});

describe('an SFTP login whose user changes while its password is being checked', () => {
  let s: TestServer;
  let admin: string;
  beforeAll(async () => {
    s = await startTestServer();
    admin = await s.login();
  });
  afterAll(async () => {
    await s?.close();
  });

  /**
   * Logs `username` in over SFTP with the right password while the user is disabled during the
   * password check (scrypt, tens of ms). Attempts from one address run one after another, so the
   * SFTP attempt is queued behind REST logins from 127.0.0.1: it starts reading the user when the
   * last of them has answered, and the disable is sent at that moment. Resolves whether the
   * connection could still list `/` afterwards.
   */
  async function loginWhileDisabled(username: string, id: number): Promise<boolean> {
    const client = new ssh2.Client();
    client.on('error', () => undefined);
    const closed = new Promise<void>((r) => client.once('close', () => r()));
    let disabled!: Promise<unknown>;
    const ready = new Promise<boolean>((resolve) => {
      client.once('ready', () => resolve(true));
      client.once('close', () => resolve(false));
      client.connect({
        host: '127.0.0.1', port: s.sftpPort, username, readyTimeout: 20_000,
        authHandler: (_methods, _partial, next) => {
          // Queue REST logins (right password: nothing counts as a failure) ahead of the SFTP attempt.
          const rest = Promise.all(Array.from({ length: 4 }, () => s.login()));
          disabled = rest.then(() => s.api('/api/admin/user/update', { token: admin, body: { id, username, disabled: true, permission: PERM.SFTP_READ } }));
          void sleep(15).then(() => next({ type: 'password', username, password: 'race-pass-1' }));
        },
      });
    });
    const loggedIn = await ready;
    expect(await disabled).toMatchObject({ code: 200 });
    if (!loggedIn) return false;
    const listed = await Promise.race([
      new Promise<boolean>((resolve) => {
        try {
          client.sftp((e, w) => (e ? resolve(false) : w.readdir('/', (err) => resolve(!err))));
        } catch {
          resolve(false); // already closed by the server ("Not connected")
        }
      }),
      closed.then(() => false),
    ]);
    client.end();
    return listed;
  }

  it('does not keep a connection for a user disabled during the check', async () => {
    const results: boolean[] = [];
    for (let i = 0; i < 3; i++) {
      const name = `racer${i}`;
      const id = await createUser(s, admin, { username: name, password: 'race-pass-1', permission: PERM.SFTP_READ });
      results.push(await loginWhileDisabled(name, id));
    }
    // A disabled user's connection must not list anything, however the disable and the login interleave.
    expect(results).toEqual([false, false, false]);
  });
});

describe('an SFTP key login while DATA is full', () => {
  let s: TestServer | undefined;
  let sd: SmallDisk | undefined;
  let work: string;
  let disk: string;
  beforeAll(async () => {
    requireSftpTools([['sshpass', 'sshpass']]);
    sd = await smallDisk('16m', 'tg-review-auth-');
    ({ work, disk } = sd);
    s = await startTestServer({ dataDir: disk });
  });
  afterAll(async () => {
    await s?.close();
    await sd?.remove();
  });

  it('logs in (last_used_time is bookkeeping, not a condition of the login)', async () => {
    const srv = s!;
    const token = await srv.login();
    const key = await makeKey(work, 'full-key');
    expect(await srv.api('/api/me/sshkey/add', { token, body: { title: 'k', key: key.pub } })).toMatchObject({ code: 200 });
    // Fill DATA to the last byte: the store cannot be written any more.
    await writeFile(join(disk, 'filler'), Buffer.alloc(17 << 20)).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOSPC') throw e;
    });
    // The password still logs in (nothing is written for it) ...
    const byPassword = await runSftp({ port: srv.sftpPort, user: 'admin', password: ADMIN_PASSWORD }, ['ls /']);
    expect(byPassword.code, byPassword.stderr).toBe(0);
    // ... and so must the key: the admin logging in to make room is the likeliest user of a full disk.
    const byKey = await runSftp({ port: srv.sftpPort, user: 'admin', key: key.path }, ['ls /']);
    expect(byKey.code, byKey.stderr).toBe(0);
  });
});
