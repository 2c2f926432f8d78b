/**
 * Accounts: the one place that decides whether a username + secret is a valid login, for every
 * protocol. REST, WebDAV and SFTP call `authenticate` (or the cached variant for per-request Basic
 * auth) and map the result's `reason` to their own wire answer.
 */
import * as crypto from 'node:crypto';
import { authenticator } from 'otplib';
import type { Store } from '../store/store.js';
import type { UserRecord } from '../store/types.js';
import { ROLE, can, type Principal, type Protocol, type Role } from './principal.js';
import { hashPassword, newSalt, staticHash, verifyStatic } from './passwords.js';
import { ipKey, LoginThrottle } from './throttle.js';
import { OtpGuard } from './otp-guard.js';
import { normalize } from '../paths.js';

export type LoginFailure =
  | 'throttled' // too many failures from this IP
  | 'no_user' // unknown username
  | 'bad_password'
  | 'otp_required' // user has 2FA and no/wrong code was given
  | 'disabled'
  | 'protocol_denied'; // the user lacks the protocol's login bit (WebDAV/SFTP)

export type LoginSuccess = { ok: true; user: UserRecord; principal: Principal };
export type LoginResult = LoginSuccess | { ok: false; reason: LoginFailure };

/** A verified Basic credential: the login it gave, until when, and the users revision it was checked at. */
interface VerifiedCredential {
  until: number;
  usersRevision: number;
  result: LoginSuccess;
}

export interface LoginRequest {
  username: string;
  /** Exactly one of plain / hashed. */
  password?: string;
  /** AList's static hash (from /api/auth/login/hash). */
  hashed?: string;
  /** TOTP code; checked only when the user has 2FA. */
  otp?: string;
  ip: string;
  protocol: Protocol;
  /**
   * Whether a missing 2FA code is acceptable (WebDAV Basic cannot carry one; see README for the
   * policy). REST and SFTP keyboard-interactive pass false.
   */
  skipOtp?: boolean;
}

/** How long a verified Basic credential is trusted without re-running scrypt. */
const CREDENTIAL_TTL_MS = 60_000;

export function principalOf(u: UserRecord): Principal {
  return {
    userId: u.id,
    username: u.username,
    role: u.role as Role,
    basePath: normalize(u.base_path || '/'),
    permission: u.permission,
    disabled: u.disabled,
    otp: u.otp_secret !== '',
    pwdTs: u.pwd_ts,
  };
}

export function checkTotp(secret: string, code: string): boolean {
  return totpStep(secret, code) !== null;
}

/**
 * The 30-second time step `code` is valid for (one step either side of now), or null. White space
 * around the code is ignored, as AList's pquerna/otp does: a code pasted from an authenticator app
 * with a trailing newline or space was refused (and counted as a wrong code).
 */
export function totpStep(secret: string, code: string, nowMs = Date.now()): number | null {
  code = code.trim();
  if (!/^\d{6}$/.test(code)) return null;
  const delta = authenticator.clone({ window: 1, epoch: nowMs }).checkDelta(code, secret);
  return delta === null ? null : Math.floor(nowMs / 30_000) + delta;
}

/**
 * SHA-256 (base64) of a string, one-shot where Node has crypto.hash (20.12+).
 *
 * The credential cache's key is this digest over a random secret followed by the credential, not an
 * HMAC: the digest never leaves the process, so the length extension an HMAC guards against cannot
 * be used, and a forged hit would still need a SHA-256 second preimage. It is computed on every
 * WebDAV request, where createHmac measured about 12 µs against 4 µs for the one-shot hash.
 */
const sha256: (data: string) => string =
  typeof crypto.hash === 'function'
    ? (data) => crypto.hash('sha256', data, 'base64')
    : (data) => crypto.createHash('sha256').update(data).digest('base64');

export class Accounts {
  readonly throttle = new LoginThrottle();
  /** 2FA code guessing, per user (the throttle above counts per client address). */
  readonly otpGuard = new OtpGuard();
  /** keyed digest of (protocol, username, password) → the login it gave. */
  private readonly verified = new Map<string, VerifiedCredential>();
  /** Running checks of credentials not (or no longer) in `verified`: client IP + `verified` key → check. */
  private readonly checking = new Map<string, Promise<LoginResult>>();
  private readonly cacheKey = crypto.randomBytes(32).toString('hex');
  /**
   * Per user and 2FA secret, the last time step a code was accepted for. A code logs in once (RFC
   * 6238 §5.2): without this, a code seen or relayed (a shoulder, a phishing page) was a second
   * login for the rest of its 90-second window. In memory only: a restart forgets at most 90 s.
   */
  private readonly otpSteps = new Map<number, { secret: string; step: number }>();
  /** onUsersChange listeners: holders of long-lived logins (SFTP connections). */
  private readonly usersListeners = new Set<() => void>();

  constructor(private readonly store: Store) {
    store.onExternalChange(() => this.usersChanged());
  }

  /**
   * Called after user records may have changed: every in-process user write is followed by
   * forgetCredentials() or setPassword() (the REST routes' rule), and another process's write
   * (`treegate admin set`) arrives as the store's external change. Whoever keeps a principal beyond
   * one request (an SFTP connection) re-reads its user here instead of on every request. Listeners
   * run synchronously after the write is stored; they must not throw. Returns an unsubscribe.
   */
  onUsersChange(listener: () => void): () => void {
    this.usersListeners.add(listener);
    return () => this.usersListeners.delete(listener);
  }

  private usersChanged(): void {
    this.verified.clear();
    for (const l of this.usersListeners) l();
  }

  async byName(username: string): Promise<UserRecord | undefined> {
    return (await this.store.users.findBy('username', username))[0];
  }

  async byId(id: number): Promise<UserRecord | undefined> {
    return this.store.users.get(id);
  }

  async guest(): Promise<UserRecord | undefined> {
    return (await this.store.users.findBy('role', ROLE.GUEST))[0];
  }

  async admin(): Promise<UserRecord | undefined> {
    return (await this.store.users.findBy('role', ROLE.ADMIN))[0];
  }

  /**
   * Check a login. Counts failures against the IP and clears them on success. Attempts from one IP
   * run one after another (LoginThrottle.serially), so parallel guesses cannot outrun the limit.
   */
  authenticate(req: LoginRequest): Promise<LoginResult> {
    return this.throttle.serially(req.ip, () => this.attempt(req));
  }

  private async attempt(req: LoginRequest): Promise<LoginResult> {
    if (!this.throttle.allow(req.ip)) return { ok: false, reason: 'throttled' };
    const fail = (reason: LoginFailure): LoginResult => {
      this.throttle.fail(req.ip, req.username);
      return { ok: false, reason };
    };
    const user = await this.byName(req.username);
    if (!user) {
      // Spend the same time as a real check so usernames cannot be probed by timing.
      await verifyStatic(staticHash(req.password ?? req.hashed ?? ''), 'timing', 'scrypt$00');
      return fail('no_user');
    }
    const hashed = req.hashed ?? (req.password !== undefined ? staticHash(req.password) : '');
    if (!hashed || !(await verifyStatic(hashed, user.salt, user.pwd_hash))) return fail('bad_password');
    if (user.otp_secret && !req.skipOtp) {
      // The right password with no code at all (WebDAV Basic, SFTP's password method, the first step
      // of keyboard-interactive) is no guess: counting it would let a 2FA user's WebDAV client lock
      // out their IP. It does not clear the IP's failures either. A code given (REST sends '' when
      // absent, as AList counts it) must be right.
      if (req.otp === undefined) return { ok: false, reason: 'otp_required' };
      // Too many wrong codes for this user, from wherever they came (otp-guard.ts).
      if (!this.otpGuard.allow(user.id, user.pwd_ts)) return fail('throttled');
      const step = totpStep(user.otp_secret, req.otp);
      // Per user (one entry each, whatever number of secrets they went through): keyed by user and
      // secret, a user re-enrolling 2FA again and again grew the map without end.
      const last = this.otpSteps.get(user.id);
      const spent = last && last.secret === user.otp_secret ? last.step : -Infinity;
      // A code of a step already used (the same code again, or an older one) is refused like a wrong
      // one. Checked and recorded in one synchronous step, so parallel logins cannot both pass.
      if (step === null || step <= spent) {
        this.otpGuard.fail(user.id, user.pwd_ts);
        return fail('otp_required');
      }
      this.otpSteps.set(user.id, { secret: user.otp_secret, step });
      this.otpGuard.succeed(user.id);
    }
    const principal = principalOf(user);
    if (user.disabled) return { ok: false, reason: 'disabled' };
    if (!can.login(principal, req.protocol)) return { ok: false, reason: 'protocol_denied' };
    this.throttle.succeed(req.ip, user.username, can.isAdmin(principal));
    return { ok: true, user, principal };
  }

  /**
   * The key authenticateCached files a credential under: a keyed digest (see sha256). `key` there is
   * this, computed by a caller that remembers it (WebDAV, per connection: protocols/webdav/auth.ts).
   */
  credentialKey(protocol: Protocol, username: string, password: string): string {
    return sha256(this.cacheKey + JSON.stringify([protocol, username, password]));
  }

  /**
   * The login a credential gave (by its credentialKey) while that answer stands and `ip` is not
   * locked out (as authenticateCached: a proxy's pooled connection carries other clients' requests
   * too); undefined otherwise.
   */
  cachedLogin(key: string, ip: string): LoginSuccess | undefined {
    const hit = this.verified.get(key);
    return hit && this.stands(hit) && this.throttle.allow(ip) ? hit.result : undefined;
  }

  /** A cached answer stands until it expires or any user record changes (then it is checked again). */
  private stands(hit: VerifiedCredential): boolean {
    return hit.until > Date.now() && hit.usersRevision === this.store.users.revision();
  }

  /**
   * authenticate() for protocols that send the password on every request (WebDAV Basic): a verified
   * credential is remembered as a keyed digest for a short time and trusted only while the user's
   * pwd_ts is unchanged and the user still exists, is enabled and may use the protocol.
   *
   * A hit while no user record has changed since it was checked (the users collection's revision)
   * answers at once, without a promise: it is on the path of every WebDAV request. After any change
   * to users, the next request re-reads its user and checks it again.
   */
  authenticateCached(req: LoginRequest & { password: string }, key = this.credentialKey(req.protocol, req.username, req.password)): LoginResult | Promise<LoginResult> {
    const hit = this.verified.get(key);
    // The cache is shared by all clients: without this, an address locked out for guessing got a
    // credential someone else keeps cached accepted (its wrong guesses cost a quick 429 each, no
    // scrypt), so the lock-out told it which guess was right. A miss meets the throttle in authenticate.
    if (hit && !this.throttle.allow(req.ip)) return { ok: false, reason: 'throttled' };
    if (hit && this.stands(hit)) return hit.result;
    // Requests a client sends in parallel with the same credential share one check: checks from one
    // IP run one at a time (authenticate), and each would cost a scrypt. Per IP, as the throttle counts.
    const checkKey = `${ipKey(req.ip)} ${key}`;
    const running = this.checking.get(checkKey);
    if (running) return running;
    const check = this.recheckCached(key, hit, req).finally(() => this.checking.delete(checkKey));
    this.checking.set(checkKey, check);
    return check;
  }

  private async recheckCached(key: string, hit: VerifiedCredential | undefined, req: LoginRequest & { password: string }): Promise<LoginResult> {
    const usersRevision = this.store.users.revision();
    if (hit && hit.until > Date.now()) {
      const user = await this.byId(hit.result.user.id);
      // The same record as at the check (name, password generation, 2FA secret): only then does
      // the cached answer stand. A 2FA switched on needs a code, which Basic auth cannot carry.
      if (user && user.username === req.username && user.pwd_ts === hit.result.user.pwd_ts && user.otp_secret === hit.result.user.otp_secret) {
        const principal = principalOf(user);
        if (user.disabled) return { ok: false, reason: 'disabled' };
        if (!can.login(principal, req.protocol)) return { ok: false, reason: 'protocol_denied' };
        return this.remember(key, { ok: true, user, principal }, usersRevision, hit.until);
      }
      this.verified.delete(key);
    }
    const r = await this.authenticate(req);
    if (!r.ok) return r;
    if (this.verified.size > 10_000) this.verified.clear();
    return this.remember(key, r, usersRevision, Date.now() + CREDENTIAL_TTL_MS);
  }

  /** Cache a successful result; it is frozen because every hit hands out the same objects. */
  private remember(key: string, r: LoginSuccess, usersRevision: number, until: number): LoginSuccess {
    const result: LoginSuccess = Object.freeze({ ok: true, user: Object.freeze(r.user), principal: Object.freeze(r.principal) });
    this.verified.set(key, { until, usersRevision, result });
    return result;
  }

  /** Set a user's password: new salt, scrypt over the static hash, new pwd_ts (kills its tokens). */
  async setPassword(userId: number, plain: string): Promise<UserRecord> {
    const salt = newSalt();
    return this.setPasswordHash(userId, salt, await hashPassword(plain, salt));
  }

  /** setPassword() with the salt and stored hash made elsewhere (`treegate admin set` hands them to the server). */
  async setPasswordHash(userId: number, salt: string, pwd_hash: string): Promise<UserRecord> {
    const user = await this.store.users.update(userId, { salt, pwd_hash, pwd_ts: this.nextPwdTs(await this.byId(userId)) });
    this.usersChanged();
    return user;
  }

  /** A pwd_ts strictly greater than the current one, so tokens die even within the same second. */
  nextPwdTs(user: UserRecord | undefined): number {
    return Math.max(Math.floor(Date.now() / 1000), (user?.pwd_ts ?? 0) + 1);
  }

  /**
   * Drop cached credentials and tell onUsersChange listeners (after any user change: disable,
   * delete, permission change; and after an SSH key is deleted, which ends the logins it made).
   */
  forgetCredentials(): void {
    this.usersChanged();
  }
}
