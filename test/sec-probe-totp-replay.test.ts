/**
 * Security probe: a TOTP code that logged in once could log in again for the rest of its window
 * (up to 90 s with the ±1 step tolerance): whoever saw or phished the password and one code (a
 * shoulder, a proxy log, a fake login page relaying it) had a second login of their own. RFC 6238
 * §5.2: the verifier must not accept a code again after a successful validation. Accounts now
 * remembers, per user, the last time step a code was accepted for and takes only later ones.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticator } from 'otplib';
import { startTestServer, type TestServer } from './harness.js';
import { createUser } from './auth-helpers.js';

let s: TestServer;
let secret: string;
const PASSWORD = 'totp-replay-pass';

beforeAll(async () => {
  s = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  const admin = await s.login();
  await createUser(s, admin, { username: 'totp', password: PASSWORD });
  const token = await s.login('totp', PASSWORD);
  secret = (await s.api<{ secret: string }>('/api/auth/2fa/generate', { token, method: 'POST' })).data!.secret;
  expect(await s.api('/api/auth/2fa/verify', { token, body: { code: authenticator.generate(secret), secret } })).toMatchObject({ code: 200 });
});
afterAll(async () => {
  await s?.close();
});

const login = (otp_code: string) => s.api('/api/auth/login', { body: { username: 'totp', password: PASSWORD, otp_code } });

describe('a TOTP code', () => {
  it('logs in once; replayed within its window it is refused', async () => {
    // The code of the step before the current one: still inside the ±1 window, as a relayed code is.
    const stepMs = 30_000;
    // Not near a step's end: the steps must not move on while the codes are used.
    const left = stepMs - (Date.now() % stepMs);
    if (left < 5_000) await new Promise((r) => setTimeout(r, left + 200));
    const previous = authenticator.clone({ epoch: Date.now() - stepMs }).generate(secret);
    const current = authenticator.generate(secret);
    expect((await login(previous)).code).toBe(200);
    expect(await login(previous)).toMatchObject({ code: 402, message: 'Invalid 2FA code' });
    // A newer code still works (the same step again does not).
    expect((await login(current)).code).toBe(200);
    expect((await login(current)).code).toBe(402);
    // An older code than one already used is refused too.
    expect((await login(previous)).code).toBe(402);
  });
});
