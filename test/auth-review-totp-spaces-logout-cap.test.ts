/**
 * Code review of login, tokens, 2FA and /api/me: defects found by reading src/auth and the REST auth
 * routes, each shown here against a real server on loopback.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticator } from 'otplib';
import { startTestServer, type TestServer } from './harness.js';
import { clearThrottle, createUser } from './auth-helpers.js';

let s: TestServer;
let admin: string;

beforeAll(async () => {
  s = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  admin = await s.login();
});
afterAll(async () => {
  await s?.close();
});

/** Wait out the end of a 30 s TOTP step when it is close, so codes used together stay in one step. */
async function awayFromStepEnd(): Promise<void> {
  const left = 30_000 - (Date.now() % 30_000);
  if (left < 5_000) await new Promise((r) => setTimeout(r, left + 200));
}

describe('2FA codes with surrounding white space', () => {
  it('are accepted by /2fa/verify and at login, as AList (pquerna/otp trims the passcode)', async () => {
    await createUser(s, admin, { username: 'spacey', password: 'spacey-pass' });
    const token = await s.login('spacey', 'spacey-pass');
    const secret = (await s.api<{ secret: string }>('/api/auth/2fa/generate', { token, method: 'POST' })).data!.secret;
    await awayFromStepEnd();
    // A code pasted from an authenticator app often carries a trailing newline or space.
    expect(await s.api('/api/auth/2fa/verify', { token, body: { code: `${authenticator.generate(secret)}\n`, secret } })).toMatchObject({ code: 200 });
    expect((await s.api('/api/me', { token })).data).toMatchObject({ otp: true });
    // The code of the next step (inside the ±1 window, not yet used) with spaces around it.
    const next = authenticator.clone({ epoch: Date.now() + 30_000 }).generate(secret);
    const r = await s.api<{ token: string }>('/api/auth/login', { body: { username: 'spacey', password: 'spacey-pass', otp_code: ` ${next} ` } });
    expect(r).toMatchObject({ code: 200 });
    await clearThrottle(s);
  });
});

describe('an admin cancelling a user\'s 2FA', () => {
  it('also ends the lock of wrong codes: 2FA switched on again works at once', async () => {
    const uid = await createUser(s, admin, { username: 'relock', password: 'relock-pass' });
    const enable = async () => {
      const token = await s.login('relock', 'relock-pass');
      const secret = (await s.api<{ secret: string }>('/api/auth/2fa/generate', { token, method: 'POST' })).data!.secret;
      await awayFromStepEnd();
      expect(await s.api('/api/auth/2fa/verify', { token, body: { code: authenticator.generate(secret), secret } })).toMatchObject({ code: 200 });
      return secret;
    };
    await enable();
    // Five wrong codes with the right password lock the user's code attempts (otp-guard.ts).
    for (let i = 0; i < 5; i++) {
      await s.api('/api/auth/login', { body: { username: 'relock', password: 'relock-pass', otp_code: '000000' } });
      await clearThrottle(s);
    }
    expect(await s.api(`/api/admin/user/cancel_2fa?id=${uid}`, { token: admin, method: 'POST' })).toMatchObject({ code: 200 });
    const secret = await enable();
    const next = authenticator.clone({ epoch: Date.now() + 30_000 }).generate(secret);
    expect(await s.api('/api/auth/login', { body: { username: 'relock', password: 'relock-pass', otp_code: next } })).toMatchObject({ code: 200 });
    await clearThrottle(s);
  });
});

describe('logout past the per-user revocation cap', () => {
  it("ends the user's other tokens once, not on every later logout", async () => {
    const id = await createUser(s, admin, { username: 'looper', password: 'looper-pass' });
    const { accounts, tokens } = s.running.core;
    // MAX_REVOKED_PER_USER logged-out tokens (issued in-process: 64 scrypt logins would only be slower).
    for (let i = 0; i < 64; i++) {
      const t = await tokens.issue((await accounts.byId(id))!);
      expect(await s.api('/api/auth/logout', { token: t })).toMatchObject({ code: 200 });
    }
    // The next logout ends all of the user's tokens at once (by design: the list is full).
    const a = await s.login('looper', 'looper-pass');
    const b = await s.login('looper', 'looper-pass');
    expect(await s.api('/api/auth/logout', { token: b })).toMatchObject({ code: 200 });
    expect(await s.api('/api/me', { token: a })).toMatchObject({ code: 401 });
    // From then on a logout ends only its own token again: the entries of tokens that the new pwd_ts
    // already ended are not kept. They were, and every logout for the next 48 hours (a script logging
    // in and out, another browser) logged the user out everywhere.
    const c = await s.login('looper', 'looper-pass');
    const d = await s.login('looper', 'looper-pass');
    expect(await s.api('/api/auth/logout', { token: d })).toMatchObject({ code: 200 });
    expect(await s.api('/api/me', { token: d })).toMatchObject({ code: 401 });
    expect(await s.api('/api/me', { token: c })).toMatchObject({ code: 200, data: { username: 'looper' } });
  });
});
