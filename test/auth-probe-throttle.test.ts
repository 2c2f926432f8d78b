/**
 * Findings of the authentication probe about the shared login throttle and 2FA over WebDAV:
 * parallel guesses must not outrun the 5-failure limit; a login of another user (the guest, whose
 * password is public, or an insider's own account) does not reset the counter between guesses at
 * an account; an IPv4 client of a dual-stack listener is
 * one client for every protocol; a 2FA user's WebDAV client (right password, no way to send a code)
 * neither locks out its IP nor clears it, and is refused as soon as 2FA is switched on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticator } from 'otplib';
import ssh2 from 'ssh2';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { clearThrottle, createUser, startRest } from './auth-helpers.js';
import { PERM } from './fs-helpers.js';
import { davRequest } from './clients/webdav.js';
import { withSsh2Sftp } from './clients/sftp.js';

let s: TestServer;
let admin: string;

beforeAll(async () => {
  s = await startRest();
  admin = await s.login();
});
afterAll(async () => {
  await s?.close();
});

const restLogin = (server: TestServer, username: string, password: string) => server.api('/api/auth/login', { body: { username, password } });
const propfind = (server: TestServer, user: string, password: string) => davRequest(server.url, 'PROPFIND', '/dav/', { user, password, headers: { depth: '0' } });

describe('parallel login attempts', () => {
  it('count one after another: 12 parallel wrong passwords get 5 answers and 7 refusals', async () => {
    await clearThrottle(s);
    const rs = await Promise.all(Array.from({ length: 12 }, (_, i) => restLogin(s, 'admin', `bad-${i}`)));
    const codes = rs.map((r) => r.code).sort();
    expect(codes).toEqual([...Array(5).fill(400), ...Array(7).fill(429)]);
  });

  it('with the right password all succeed (nothing fails, nothing is refused)', async () => {
    s.running.core.accounts.throttle.succeed('127.0.0.1', 'admin', true);
    const rs = await Promise.all(Array.from({ length: 8 }, () => restLogin(s, 'admin', ADMIN_PASSWORD)));
    expect(rs.map((r) => r.code)).toEqual(Array(8).fill(200));
  });
});

describe('a successful login of another user', () => {
  it("does not clear the IP's failures: the guest's (its password is public)", async () => {
    await clearThrottle(s);
    const guestId = (await s.running.core.accounts.guest())!.id;
    expect(await s.api('/api/admin/user/update', { token: admin, body: { id: guestId, username: 'guest', disabled: false } })).toMatchObject({ code: 200 });
    admin = await s.login();
    try {
      for (let i = 0; i < 4; i++) expect((await restLogin(s, 'admin', `guess-${i}`)).code).toBe(400);
      expect((await restLogin(s, 'guest', 'guest')).code).toBe(200);
      expect((await restLogin(s, 'admin', 'guess-4')).code).toBe(400);
      expect((await restLogin(s, 'admin', 'guess-5')).code).toBe(429);
    } finally {
      s.running.core.accounts.throttle.succeed('127.0.0.1', 'admin', true);
      await s.api('/api/admin/user/update', { token: admin, body: { id: guestId, username: 'guest', disabled: true } });
      admin = await s.login();
    }
  });

  it("does not clear them either for a user's own account; it does for the user who failed", async () => {
    await clearThrottle(s);
    await createUser(s, admin, { username: 'insider', password: 'insider-pass' });
    for (let i = 0; i < 4; i++) expect((await restLogin(s, 'admin', `guess-${i}`)).code).toBe(400);
    expect((await restLogin(s, 'insider', 'insider-pass')).code).toBe(200);
    expect((await restLogin(s, 'admin', 'guess-4')).code).toBe(400);
    expect((await restLogin(s, 'admin', 'guess-5')).code).toBe(429);
    s.running.core.accounts.throttle.succeed('127.0.0.1', 'admin', true);
    // A user who mistyped their own password is forgiven by their next success, as before.
    for (let i = 0; i < 4; i++) expect((await restLogin(s, 'insider', `typo-${i}`)).code).toBe(400);
    expect((await restLogin(s, 'insider', 'insider-pass')).code).toBe(200);
    for (let i = 0; i < 5; i++) expect((await restLogin(s, 'insider', `typo-${i}`)).code).toBe(400);
    s.running.core.accounts.throttle.succeed('127.0.0.1', 'admin', true);
  });
});

describe('a 2FA user over WebDAV', () => {
  const PASSWORD = 'otp-dav-pass';
  let secret: string;

  beforeAll(async () => {
    await clearThrottle(s);
    await createUser(s, admin, { username: 'otpdav', password: PASSWORD, permission: PERM.WEBDAV_READ });
  });

  it('loses a cached WebDAV credential as soon as 2FA is switched on', async () => {
    expect((await propfind(s, 'otpdav', PASSWORD)).status).toBe(207);
    const token = await s.login('otpdav', PASSWORD);
    const g = await s.api<{ secret: string }>('/api/auth/2fa/generate', { token, method: 'POST' });
    secret = g.data!.secret;
    expect(await s.api('/api/auth/2fa/verify', { token, body: { code: authenticator.generate(secret), secret } })).toMatchObject({ code: 200 });
    expect((await propfind(s, 'otpdav', PASSWORD)).status).toBe(403);
  });

  it('with the right password neither counts as a failure nor clears the IP', async () => {
    await clearThrottle(s);
    // A client retrying (Windows Explorer, davfs2) must not lock out everyone behind the same IP.
    for (let i = 0; i < 6; i++) expect((await propfind(s, 'otpdav', PASSWORD)).status).toBe(403);
    for (let i = 0; i < 4; i++) expect((await restLogin(s, 'admin', `bad-${i}`)).code).toBe(400);
    // Nor may it reset the counter between guesses.
    expect((await propfind(s, 'otpdav', PASSWORD)).status).toBe(403);
    expect((await restLogin(s, 'admin', 'bad-5')).code).toBe(400);
    expect((await restLogin(s, 'admin', ADMIN_PASSWORD)).code).toBe(429);
    // A wrong password of the 2FA user is still a failure like any other.
    expect((await propfind(s, 'otpdav', 'wrong')).status).toBe(429);
  });
});

describe('a dual-stack listener', () => {
  it('counts an IPv4 client under one address for WebDAV, REST and SFTP', async () => {
    const ds = await startTestServer({ env: { TREEGATE_HTTP_ADDRESS: '::' } });
    try {
      // WebDAV saw 127.0.0.1, REST and SFTP ::ffff:127.0.0.1: two counters for one client.
      for (let i = 0; i < 3; i++) expect((await propfind(ds, 'admin', `bad-${i}`)).status).toBe(401);
      for (let i = 0; i < 2; i++) expect((await restLogin(ds, 'admin', `bad-${i}`)).code).toBe(400);
      expect((await restLogin(ds, 'admin', ADMIN_PASSWORD)).code).toBe(429);
      await expect(withSsh2Sftp({ port: ds.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, async () => 'in')).rejects.toThrow();
    } finally {
      await ds.close();
    }
  });
});

describe('one SFTP connection trying a password by both methods', () => {
  let ss: TestServer;
  beforeAll(async () => {
    ss = await startTestServer();
  });
  afterAll(async () => {
    await ss?.close();
  });

  /** One connection: `password` with `first`, then keyboard-interactive answering `second`; how it ended. */
  function bothMethods(first: string, second: string): Promise<string> {
    return new Promise((resolve) => {
      const c = new ssh2.Client();
      const steps = [
        { type: 'password', username: 'admin', password: first },
        { type: 'keyboard-interactive', username: 'admin', prompt: (_n: string, _i: string, _l: string, _p: unknown, finish: (a: string[]) => void) => finish([second]) },
      ];
      c.on('error', (e) => resolve(e.message));
      c.on('ready', () => (c.end(), resolve('logged in')));
      c.connect({
        host: '127.0.0.1', port: ss.sftpPort, username: 'admin', readyTimeout: 20_000,
        authHandler: (_methods: unknown, _partial: unknown, next: (m: unknown) => void) => next(steps.shift() ?? false),
      } as ssh2.ConnectConfig);
    });
  }
  const refused = 'All configured authentication methods failed';

  it('counts the same wrong password once (rclone sends it by both), and two different ones twice', async () => {
    await ss.login();
    expect(await bothMethods('mistyped', 'mistyped')).toBe(refused); // one failure
    for (let i = 0; i < 4; i++) expect((await restLogin(ss, 'admin', `guess-${i}`)).code).toBe(400); // failures 2-5
    expect((await restLogin(ss, 'admin', 'guess-4')).code).toBe(429);

    ss.running.core.accounts.throttle.succeed('127.0.0.1', 'admin', true);
    expect(await bothMethods('guess-a', 'guess-b')).toBe(refused); // two guesses, two failures
    for (let i = 0; i < 3; i++) expect((await restLogin(ss, 'admin', `guess-${i}`)).code).toBe(400); // failures 3-5
    expect((await restLogin(ss, 'admin', 'guess-3')).code).toBe(429);
  });
});
