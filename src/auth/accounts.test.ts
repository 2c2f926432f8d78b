/**
 * The WebDAV credential cache (Accounts.authenticateCached): hits answer synchronously with one frozen
 * result, and any change to the users collection forces a re-check.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { JsonStore } from '../store/json-store.js';
import { Accounts, type LoginResult } from './accounts.js';
import { hashPassword, newSalt } from './passwords.js';
import { PERM, ROLE } from './principal.js';
import { MAX_OTP_FAILURES } from './otp-guard.js';
import { authenticator } from 'otplib';

let dir: string;
let store: JsonStore;
let accounts: Accounts;

async function addUser(username: string, password: string): Promise<number> {
  const salt = newSalt();
  const rec = { username, salt, pwd_hash: await hashPassword(password, salt), pwd_ts: 1, base_path: '/', role: ROLE.GENERAL, disabled: false, permission: PERM.WEBDAV_READ, sso_id: '', otp_secret: '' };
  return (await store.users.insert(rec)).id;
}

const basic = (username: string, password: string) => accounts.authenticateCached({ username, password, ip: '10.1.2.3', protocol: 'webdav' });

const userOf = (r: LoginResult) => (r.ok ? r.principal.username : r.reason);

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tg-accounts-'));
  store = await JsonStore.open(join(dir, 'store.json'));
  accounts = new Accounts(store);
});

afterEach(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

describe('the verified-credential cache', () => {
  it('answers a hit at once with one frozen result, until a user record changes', async () => {
    const id = await addUser('ann', 'ann-pass');
    const first = await basic('ann', 'ann-pass');
    expect(first.ok).toBe(true);
    const hit = basic('ann', 'ann-pass');
    expect(hit).not.toBeInstanceOf(Promise);
    expect(hit).toBe(first);
    expect(Object.isFrozen((hit as LoginResult & { ok: true }).principal)).toBe(true);
    expect(Object.isFrozen((hit as LoginResult & { ok: true }).user)).toBe(true);

    // Another user's change: a re-check (a promise), which still finds ann fine, then hits again.
    await addUser('bob', 'bob-pass');
    const recheck = basic('ann', 'ann-pass');
    expect(recheck).toBeInstanceOf(Promise);
    expect(userOf(await recheck)).toBe('ann');
    expect(basic('ann', 'ann-pass')).not.toBeInstanceOf(Promise);

    // A change written straight to the store (no forgetCredentials) is seen on the next request.
    await store.users.update(id, { disabled: true });
    expect(await basic('ann', 'ann-pass')).toEqual({ ok: false, reason: 'disabled' });
  });

  it('does not stand once the user has 2FA (Basic auth cannot carry a code), even without forgetCredentials', async () => {
    const id = await addUser('ann', 'ann-pass');
    expect(userOf(await basic('ann', 'ann-pass'))).toBe('ann');
    await store.users.update(id, { otp_secret: 'JBSWY3DPEHPK3PXP' }); // straight to the store, as above
    expect(userOf(await basic('ann', 'ann-pass'))).toBe('otp_required');
  });

  it('drops a cached credential on a password change', async () => {
    const id = await addUser('ann', 'ann-pass');
    expect(userOf(await basic('ann', 'ann-pass'))).toBe('ann');
    expect(userOf(await basic('ann', 'ann-pass'))).toBe('ann');
    await accounts.setPassword(id, 'ann-new-pass');
    expect(userOf(await basic('ann', 'ann-pass'))).toBe('bad_password');
    expect(userOf(await basic('ann', 'ann-new-pass'))).toBe('ann');
  });

  it('keeps each credential to its own user', async () => {
    await addUser('ann', 'ann-pass');
    await addUser('bob', 'bob-pass');
    expect(userOf(await basic('ann', 'ann-pass'))).toBe('ann');
    expect(userOf(await basic('bob', 'bob-pass'))).toBe('bob');
    expect(userOf(await basic('ann', 'bob-pass'))).toBe('bad_password');
    expect(userOf(await basic('ann', 'ann-pass'))).toBe('ann');
  });
});

describe('2FA code guessing', () => {
  const SECRET = 'JBSWY3DPEHPK3PXP';
  const login = (otp: string, ip: string) => accounts.authenticate({ username: 'ann', password: 'ann-pass', otp, ip, protocol: 'rest' });
  const wrongCode = () => {
    const right = authenticator.generate(SECRET);
    return String((Number(right) + 500_000) % 1_000_000).padStart(6, '0');
  };

  it('is limited per account: wrong codes from many addresses lock the user, not only each address', async () => {
    const id = await addUser('ann', 'ann-pass');
    await store.users.update(id, { otp_secret: SECRET });
    // One wrong code from each address: no address comes near its own limit.
    for (let i = 0; i < MAX_OTP_FAILURES; i++) expect(userOf(await login(wrongCode(), `10.0.0.${i + 1}`))).toBe('otp_required');
    // Now even the right code, from an address never seen, is refused.
    expect(userOf(await login(authenticator.generate(SECRET), '10.0.1.1'))).toBe('throttled');
    // A wrong password is still just a wrong password (the lock is on code attempts).
    expect(userOf(await accounts.authenticate({ username: 'ann', password: 'nope', otp: '000000', ip: '10.0.1.2', protocol: 'rest' }))).toBe('bad_password');
    // A new password (set by an admin, or by the user elsewhere) ends the lock.
    await accounts.setPassword(id, 'ann-pass');
    expect(userOf(await login(authenticator.generate(SECRET), '10.0.1.3'))).toBe('ann');
  });
});
