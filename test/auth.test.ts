/**
 * Login endpoints and the Authorization hook against a real server: AList's codes and messages,
 * every way a token dies, guest handling, the admin API token, role guards, throttling.
 */
import { describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { clearThrottle, createUser, jwtSecretOf, serveForFile, startRest } from './auth-helpers.js';
import { staticHash } from '../src/auth/passwords.js';

const THROTTLED = 'Too many unsuccessful sign-in attempts have been made using an incorrect username or password, Try again later.';

let s: TestServer;
let admin: string;
const secrets: string[] = [ADMIN_PASSWORD];

serveForFile(secrets, (server, token) => ((s = server), (admin = token)));

describe('login', () => {
  it('accepts a JSON body and returns a token that works', async () => {
    const r = await s.api<{ token: string }>('/api/auth/login', { body: { username: 'admin', password: ADMIN_PASSWORD } });
    expect(r).toMatchObject({ code: 200, message: 'success' });
    secrets.push(r.data!.token);
    expect((await s.api('/api/me', { token: r.data!.token })).data).toMatchObject({ username: 'admin', role: 2 });
  });

  it('accepts a form body and the static hash on /login/hash', async () => {
    const form = await s.api<{ token: string }>('/api/auth/login', {
      body: `username=admin&password=${encodeURIComponent(ADMIN_PASSWORD)}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.code).toBe(200);
    const hashed = await s.api<{ token: string }>('/api/auth/login/hash', { body: { username: 'admin', password: staticHash(ADMIN_PASSWORD) } });
    expect(hashed.code).toBe(200);
    // The plain password sent to /hash is not the hash: refused.
    expect(await s.api('/api/auth/login/hash', { body: { username: 'admin', password: ADMIN_PASSWORD } })).toMatchObject({ code: 400, message: 'password is incorrect' });
    secrets.push(form.data!.token, hashed.data!.token, staticHash(ADMIN_PASSWORD));
    await clearThrottle(s);
  });

  it('answers AList messages for unknown users, wrong and empty passwords', async () => {
    expect(await s.api('/api/auth/login', { body: { username: 'nobody', password: 'x' } })).toEqual({ code: 400, message: 'failed find user: record not found', data: null });
    expect(await s.api('/api/auth/login', { body: { username: 'admin', password: 'wrong' } })).toEqual({ code: 400, message: 'password is incorrect', data: null });
    expect(await s.api('/api/auth/login/hash', { body: { username: 'admin', password: '' } })).toMatchObject({ code: 400, message: 'password is empty' });
    await clearThrottle(s);
  });

  it('refuses missing usernames, wrong types and malformed JSON with 400', async () => {
    expect(await s.api('/api/auth/login', { body: { password: 'x' } })).toMatchObject({ code: 400, message: 'invalid request: username is required' });
    expect(await s.api('/api/auth/login', { body: { username: 5, password: 'x' } })).toMatchObject({ code: 400, message: 'invalid request: username must be a string' });
    expect(await s.api('/api/auth/login', { body: { username: 'admin', password: ['x'] } })).toMatchObject({ code: 400, message: 'invalid request: password must be a string' });
    expect(await s.api('/api/auth/login', { body: '{"username":', headers: { 'content-type': 'application/json' } })).toMatchObject({ code: 400, message: 'invalid request: malformed JSON body' });
    expect(await s.api('/api/auth/login', { body: '[1,2]', headers: { 'content-type': 'application/json' } })).toMatchObject({ code: 400 });
  });
});

describe('tokens', () => {
  it('takes the raw token only: a Bearer prefix is an invalid token', async () => {
    expect(await s.api('/api/me', { token: `Bearer ${admin}` })).toEqual({ code: 401, message: 'token is invalidated', data: null });
    expect(await s.api('/api/me', { token: 'garbage' })).toMatchObject({ code: 401, message: 'token is invalidated' });
  });

  it('refuses a tampered signature and alg none', async () => {
    const [h, p, sig] = admin.split('.');
    const flipped = sig!.startsWith('A') ? 'B' + sig!.slice(1) : 'A' + sig!.slice(1);
    expect(await s.api('/api/me', { token: `${h}.${p}.${flipped}` })).toMatchObject({ code: 401, message: 'token is invalidated' });
    const none = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
    expect(await s.api('/api/me', { token: `${none}.${p}.` })).toMatchObject({ code: 401, message: 'token is invalidated' });
    // A payload changed under the original signature.
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString()) as Record<string, unknown>;
    const forged = Buffer.from(JSON.stringify({ ...claims, username: 'guest' })).toString('base64url');
    expect(await s.api('/api/me', { token: `${h}.${forged}.${sig}` })).toMatchObject({ code: 401, message: 'token is invalidated' });
  });

  it('refuses an expired token signed with the real secret', async () => {
    const user = (await s.running.core.store.users.findBy('username', 'admin'))[0]!;
    const now = Math.floor(Date.now() / 1000);
    const key = new TextEncoder().encode(await jwtSecretOf(s.dataDir));
    const sign = (exp: number) =>
      new SignJWT({ username: 'admin', pwd_ts: user.pwd_ts, uid: user.id }).setProtectedHeader({ alg: 'HS256' }).setJti(`t-${exp}`).setIssuedAt(now - 7200).setNotBefore(now - 7200).setExpirationTime(exp).sign(key);
    expect(await s.api('/api/me', { token: await sign(now - 60) })).toMatchObject({ code: 401, message: 'token is expired' });
    // The same construction with a future exp is accepted: the test above fails for the right reason.
    expect(await s.api('/api/me', { token: await sign(now + 600) })).toMatchObject({ code: 200 });
  });

  it('dies on logout, and only the presented token dies', async () => {
    const t1 = await s.login();
    const t2 = await s.login();
    expect(await s.api('/api/auth/logout', { token: t1 })).toEqual({ code: 200, message: 'success', data: null });
    expect(await s.api('/api/me', { token: t1 })).toMatchObject({ code: 401, message: 'token is invalidated' });
    expect(await s.api('/api/me', { token: t2 })).toMatchObject({ code: 200 });
  });

  it('dies when the password changes, dies for disabled and deleted users', async () => {
    const id = await createUser(s, admin, { username: 'carol', password: 'carol-pass-1' });
    const carol = await s.login('carol', 'carol-pass-1');
    expect(await s.api('/api/me/update', { token: carol, body: { username: 'carol', password: 'carol-pass-2' } })).toMatchObject({ code: 200 });
    expect(await s.api('/api/me', { token: carol })).toMatchObject({ code: 401, message: 'Password has been changed, login please' });
    const carol2 = await s.login('carol', 'carol-pass-2');
    // Disabled outside the API (as another process would): the hook refuses the token.
    await s.running.core.store.users.update(id, { disabled: true });
    expect(await s.api('/api/me', { token: carol2 })).toMatchObject({ code: 401, message: 'Current user is disabled, replace please' });
    // ...and login is refused for a disabled user (decision 3).
    expect(await s.api('/api/auth/login', { body: { username: 'carol', password: 'carol-pass-2' } })).toMatchObject({ code: 403 });
    await s.running.core.store.users.update(id, { disabled: false });
    expect(await s.api('/api/me', { token: carol2 })).toMatchObject({ code: 200 });
    expect(await s.api(`/api/admin/user/delete?id=${id}`, { token: admin, method: 'POST' })).toMatchObject({ code: 200 });
    expect(await s.api('/api/me', { token: carol2 })).toMatchObject({ code: 401, message: 'failed find user: record not found' });
    // A new user who takes the deleted user's name (even with an equal pwd_ts) does not inherit its tokens.
    const newId = await createUser(s, admin, { username: 'carol', password: 'carol-pass-3' });
    const deleted = (await s.running.core.store.users.get(newId))!;
    const tokenPwdTs = JSON.parse(Buffer.from(carol2.split('.')[1]!, 'base64url').toString()).pwd_ts as number;
    await s.running.core.store.users.update(newId, { pwd_ts: tokenPwdTs });
    expect(deleted.id).not.toBe(id);
    expect(await s.api('/api/me', { token: carol2 })).toMatchObject({ code: 401, message: 'failed find user: record not found' });
    secrets.push('carol-pass-1', 'carol-pass-2', 'carol-pass-3', carol, carol2);
  });

  it('accepts the admin API token setting as the admin', async () => {
    const token = s.running.core.settings.get('token');
    secrets.push(token);
    expect((await s.api('/api/me', { token })).data).toMatchObject({ username: 'admin' });
    expect(await s.api('/api/admin/user/list', { token })).toMatchObject({ code: 200 });
    expect(await s.api('/api/me', { token: token.slice(0, -1) })).toMatchObject({ code: 401 });
  });
});

describe('guest and roles', () => {
  it('answers 401 without a token while the guest is disabled, the guest when enabled', async () => {
    expect(await s.api('/api/me')).toEqual({ code: 401, message: 'Guest user is disabled, login please', data: null });
    const guestId = (await s.running.core.accounts.guest())!.id;
    const on = await s.api('/api/admin/user/update', { token: admin, body: { id: guestId, username: 'guest', role: 1, disabled: false, permission: 0, base_path: '/' } });
    expect(on).toMatchObject({ code: 200 });
    expect((await s.api('/api/me')).data).toMatchObject({ username: 'guest', role: 1, otp: false, password: '' });
    expect(await s.api('/api/admin/user/list')).toEqual({ code: 403, message: 'You are not an admin', data: null });
    expect(await s.api('/api/me/update', { body: { username: 'guest2' } })).toMatchObject({ code: 403, message: 'Guest user can not update profile' });
    await s.api('/api/admin/user/update', { token: admin, body: { id: guestId, username: 'guest', role: 1, disabled: true } });
    expect(await s.api('/api/me')).toMatchObject({ code: 401 });
  });

  it('keeps /api/admin/* for the admin and leaves public routes open', async () => {
    await createUser(s, admin, { username: 'dave', password: 'dave-pass' });
    const dave = await s.login('dave', 'dave-pass');
    secrets.push(dave, 'dave-pass');
    expect(await s.api('/api/admin/user/list', { token: dave })).toMatchObject({ code: 403, message: 'You are not an admin' });
    expect(await s.api('/api/admin/setting/list', { token: dave })).toMatchObject({ code: 403, message: 'You are not an admin' });
    expect(await s.api('/api/public/settings')).toMatchObject({ code: 200 });
    expect(await s.api('/api/public/settings', { token: 'garbage' })).toMatchObject({ code: 200 });
    expect(await s.api('/api/nope', { token: 'garbage' })).toMatchObject({ code: 404 });
    const ping = await fetch(`${s.url}/ping`);
    expect(await ping.text()).toBe('pong');
  });
});

describe('throttling', () => {
  it('locks the IP after 5 failures with 429, even for the right password', async () => {
    await clearThrottle(s);
    for (let i = 0; i < 5; i++) {
      expect(await s.api('/api/auth/login', { body: { username: 'admin', password: `bad-${i}` } })).toMatchObject({ code: 400 });
    }
    expect(await s.api('/api/auth/login', { body: { username: 'admin', password: ADMIN_PASSWORD } })).toEqual({ code: 429, message: THROTTLED, data: null });
    // A token obtained before keeps working: the lock is on logins only.
    expect(await s.api('/api/me', { token: admin })).toMatchObject({ code: 200 });
  });
});

describe('across restarts and expiry', () => {
  it('keeps tokens valid after a restart on the same data dir, and logouts revoked', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'treegate-restart-'));
    try {
      const a = await startRest({ dataDir: dir });
      const kept = await a.login();
      const ended = await a.login();
      await a.api('/api/auth/logout', { token: ended });
      await a.close();
      const b = await startRest({ dataDir: dir });
      try {
        expect((await b.api('/api/me', { token: kept })).data).toMatchObject({ username: 'admin' });
        expect(await b.api('/api/me', { token: ended })).toMatchObject({ code: 401, message: 'token is invalidated' });
      } finally {
        await b.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('expires tokens after token_expires_in hours', async () => {
    const short = await startRest({ env: { TREEGATE_TOKEN_EXPIRES_IN: '0.0005' } }); // under 2 seconds
    try {
      const t = await short.login();
      expect(await short.api('/api/me', { token: t })).toMatchObject({ code: 200 });
      await new Promise((r) => setTimeout(r, 3100));
      expect(await short.api('/api/me', { token: t })).toMatchObject({ code: 401, message: 'token is expired' });
    } finally {
      await short.close();
    }
  });
});
