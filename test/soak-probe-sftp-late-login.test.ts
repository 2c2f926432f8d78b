/**
 * Found by a soak run (hours of OpenSSH `sftp` sessions, some killed mid-login): an SFTP client that
 * goes away while its password is being checked (scrypt, tens of milliseconds) must leave nothing
 * behind. ssh2 still emits 'ready' for such a connection after its 'close' when the login is
 * accepted late, so whatever 'ready' set up (the login in the users-change list, the idle timer,
 * ssh2's keepalive interval) was never undone: each one kept its Client, ssh2 Protocol and the
 * connection's 4 MiB packet arena and 256 KiB read buffer, the login entry for the process's life.
 *
 * Observable without reaching into the server: a login still in the users-change list is re-read
 * when its user changes, and disabling the user then "revokes" it (one log line per login).
 */
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUser } from './auth-helpers.js';
import { PERM } from './fs-helpers.js';
import { startTestServer, type TestServer } from './harness.js';

const PASSWORD = 'late-login-pass-1';
const CUT = 8;

let s: TestServer;
let admin: string;

beforeAll(async () => {
  s = await startTestServer();
  admin = await s.login();
});

afterAll(async () => {
  await s?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const msgs = (user: string) =>
  s.logs.map((l) => JSON.parse(l) as { msg?: string; user?: string }).filter((l) => l.user === user).map((l) => l.msg ?? '');

/** Send a password login and hang up at once, before the server has checked the password. */
function cutLogin(username: string): Promise<void> {
  return new Promise((resolve) => {
    const c = new ssh2.Client();
    c.on('error', () => undefined);
    c.once('close', () => resolve());
    c.connect({
      host: '127.0.0.1',
      port: s.sftpPort,
      username,
      readyTimeout: 20_000,
      authHandler: (_methods: unknown, _partial: unknown, next: (m: unknown) => void) => {
        next({ type: 'password', username, password: PASSWORD });
        setImmediate(() => c.end()); // the request is on the wire; the answer never gets read
      },
    } as ssh2.ConnectConfig);
  });
}

/** A connection that logs in and stays (the control: it must be revoked, exactly once). */
async function liveLogin(username: string): Promise<ssh2.Client> {
  const c = new ssh2.Client();
  c.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    c.once('ready', () => resolve());
    c.once('error', reject);
    c.connect({ host: '127.0.0.1', port: s.sftpPort, username, password: PASSWORD, readyTimeout: 20_000 });
  });
  return c;
}

describe('SFTP clients that hang up during the login', () => {
  it('leave no login behind: disabling the user afterwards revokes only the live connection', async () => {
    const id = await createUser(s, admin, { username: 'carol', password: PASSWORD, permission: PERM.SFTP_READ });
    await Promise.all(Array.from({ length: CUT }, () => cutLogin('carol')));
    // Every cut login was decided (attempts of one IP are checked one after another).
    for (let i = 0; i < 600 && msgs('carol').filter((m) => m.startsWith('sftp login')).length < CUT; i++) await sleep(50);
    expect(msgs('carol').filter((m) => m.startsWith('sftp login')).length).toBe(CUT);

    const live = await liveLogin('carol');
    const closed = new Promise<void>((resolve) => live.once('close', () => resolve()));
    const r = await s.api('/api/admin/user/update', { token: admin, body: { id, username: 'carol', password: '', permission: PERM.SFTP_READ, disabled: true } });
    expect(r.code, JSON.stringify(r)).toBe(200);
    await closed; // the re-reads of one users change run together: the live one's is done, so are the others'
    await sleep(200);
    expect(msgs('carol').filter((m) => m === 'sftp login revoked, closing the connection').length).toBe(1);
  });
});
