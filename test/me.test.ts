/** /api/me, profile updates and 2FA set-up and login, against a real server. */
import { beforeAll, describe, expect, it } from 'vitest';
import { authenticator } from 'otplib';
import type { TestServer } from './harness.js';
import { clearThrottle, createUser, serveForFile } from './auth-helpers.js';

let s: TestServer;
let admin: string;
const secrets: string[] = [];

serveForFile(secrets, (server, token) => ((s = server), (admin = token)));

/** A code for the next or previous 30 s step would also pass (skew 1); this one is for now. */
const codeFor = (secret: string) => authenticator.generate(secret);

/** Any valid 6-digit code that is not valid for `secret` within ±1 step. */
function wrongCodeFor(secret: string): string {
  const valid = new Set([-30_000, 0, 30_000].map((d) => authenticator.clone({ epoch: Date.now() + d }).generate(secret)));
  for (let n = 0; ; n++) {
    const c = String(n).padStart(6, '0');
    if (!valid.has(c)) return c;
  }
}

describe('/api/me', () => {
  it('returns the User object with password hidden and otp as a boolean', async () => {
    const r = await s.api<Record<string, unknown>>('/api/me', { token: admin });
    expect(r.code).toBe(200);
    expect(Object.keys(r.data!).sort()).toEqual(['base_path', 'disabled', 'id', 'otp', 'password', 'permission', 'role', 'sso_id', 'username']);
    expect(r.data).toMatchObject({ username: 'admin', password: '', otp: false, base_path: '/', disabled: false });
  });

  it('updates the username and sso_id; a new password ends old tokens', async () => {
    await createUser(s, admin, { username: 'erin', password: 'erin-pass-1', base_path: '/home/erin' });
    const t = await s.login('erin', 'erin-pass-1');
    expect((await s.api('/api/me', { token: t })).data).toMatchObject({ username: 'erin', base_path: '/home/erin' });
    expect(await s.api('/api/me/update', { token: t, body: { username: 'erin', password: '', sso_id: 'sso-1' } })).toMatchObject({ code: 200 });
    // No password: the token survives.
    expect((await s.api('/api/me', { token: t })).data).toMatchObject({ sso_id: 'sso-1' });
    expect(await s.api('/api/me/update', { token: t, body: { username: 'erin2', password: 'erin-pass-2' } })).toMatchObject({ code: 200 });
    expect(await s.api('/api/me', { token: t })).toMatchObject({ code: 401 });
    expect(await s.api('/api/auth/login', { body: { username: 'erin', password: 'erin-pass-1' } })).toMatchObject({ code: 400 });
    const t2 = await s.login('erin2', 'erin-pass-2');
    expect((await s.api('/api/me', { token: t2 })).data).toMatchObject({ username: 'erin2' });
    secrets.push(t, t2, 'erin-pass-1', 'erin-pass-2');
    await clearThrottle(s);
  });

  it('refuses an empty or taken username', async () => {
    expect(await s.api('/api/me/update', { token: admin, body: { username: '' } })).toMatchObject({ code: 400 });
    expect(await s.api('/api/me/update', { token: admin, body: {} })).toMatchObject({ code: 400, message: 'invalid request: username is required' });
    expect(await s.api('/api/me/update', { token: admin, body: { username: 'guest' } })).toMatchObject({ code: 500, message: 'UNIQUE constraint failed: x_users.username' });
    const long = { username: 'a'.repeat(256) };
    expect(await s.api('/api/me/update', { token: admin, body: long })).toMatchObject({ code: 400, message: 'invalid request: username must be at most 255 characters' });
    expect(await s.api('/api/admin/user/create', { token: admin, body: { ...long, password: 'p' } })).toMatchObject({ code: 400, message: 'invalid request: username must be at most 255 characters' });
    expect((await s.api('/api/me', { token: admin })).data).toMatchObject({ username: 'admin' });
  });
});

describe('2FA', () => {
  let user: string;
  let secret: string;

  beforeAll(async () => {
    await createUser(s, admin, { username: 'frank', password: 'frank-pass' });
    user = await s.login('frank', 'frank-pass');
    secrets.push(user, 'frank-pass');
  });

  it('generates a 32-character base32 secret and a 400x400 PNG QR code', async () => {
    const r = await s.api<{ qr: string; secret: string }>('/api/auth/2fa/generate', { token: user, method: 'POST' });
    expect(r.code).toBe(200);
    secret = r.data!.secret;
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    expect(r.data!.qr).toMatch(/^data:image\/png;base64,/);
    const png = Buffer.from(r.data!.qr.split(',')[1]!, 'base64');
    expect(png.subarray(1, 4).toString()).toBe('PNG');
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([400, 400]);
    // Nothing stored yet.
    expect((await s.api('/api/me', { token: user })).data).toMatchObject({ otp: false });
  });

  it('verifies only a correct code, then requires it at login (402)', async () => {
    expect(await s.api('/api/auth/2fa/verify', { token: user, body: { code: wrongCodeFor(secret), secret } })).toEqual({ code: 400, message: 'Invalid 2FA code', data: null });
    expect(await s.api('/api/auth/2fa/verify', { token: user, body: { code: '12345', secret } })).toMatchObject({ code: 400, message: 'Invalid 2FA code' });
    expect(await s.api('/api/auth/2fa/verify', { token: user, body: { secret } })).toMatchObject({ code: 400 });
    expect((await s.api('/api/me', { token: user })).data).toMatchObject({ otp: false });
    expect(await s.api('/api/auth/2fa/verify', { token: user, body: { code: codeFor(secret), secret } })).toEqual({ code: 200, message: 'success', data: null });
    expect((await s.api('/api/me', { token: user })).data).toMatchObject({ otp: true });

    expect(await s.api('/api/auth/login', { body: { username: 'frank', password: 'frank-pass' } })).toEqual({ code: 402, message: 'Invalid 2FA code', data: null });
    expect(await s.api('/api/auth/login', { body: { username: 'frank', password: 'frank-pass', otp_code: wrongCodeFor(secret) } })).toMatchObject({ code: 402 });
    const ok = await s.api<{ token: string }>('/api/auth/login', { body: { username: 'frank', password: 'frank-pass', otp_code: codeFor(secret) } });
    expect(ok.code).toBe(200);
    // A wrong password with a right code is still a wrong password.
    expect(await s.api('/api/auth/login', { body: { username: 'frank', password: 'nope', otp_code: codeFor(secret) } })).toMatchObject({ code: 400 });
    secrets.push(ok.data!.token, secret);
    await clearThrottle(s);
  });

  it('admin cancel_2fa turns it off', async () => {
    const id = (await s.running.core.accounts.byName('frank'))!.id;
    expect(await s.api(`/api/admin/user/cancel_2fa?id=${id}`, { token: admin, method: 'POST' })).toMatchObject({ code: 200 });
    expect(await s.api('/api/auth/login', { body: { username: 'frank', password: 'frank-pass' } })).toMatchObject({ code: 200 });
  });

  it('is refused for the guest', async () => {
    const guestId = (await s.running.core.accounts.guest())!.id;
    await s.api('/api/admin/user/update', { token: admin, body: { id: guestId, username: 'guest', disabled: false } });
    try {
      expect(await s.api('/api/auth/2fa/generate', { method: 'POST' })).toEqual({ code: 403, message: 'Guest user can not generate 2FA code', data: null });
      expect(await s.api('/api/auth/2fa/verify', { body: { code: '000000', secret: 'A'.repeat(32) } })).toMatchObject({ code: 403 });
      expect(await s.api('/api/me/sshkey/list')).toMatchObject({ code: 401, message: 'user invalid' });
    } finally {
      await s.api('/api/admin/user/update', { token: admin, body: { id: guestId, username: 'guest', disabled: true } });
    }
  });
});
