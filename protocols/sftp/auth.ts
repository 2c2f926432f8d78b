/**
 * SSH user authentication → a Principal. Every decision comes from shared code: passwords through
 * Accounts.authenticate (the one login decision: per-IP throttle, disabled users, the SFTP login
 * bit, 2FA), keys through auth/sshkeys.ts (constant-time blob lookup) plus can.login for the same
 * disabled/bit10 refusal. Only the signature check is ours: ssh2 leaves it to the server.
 *
 * 2FA (README "## SFTP"): the `password` method cannot carry a TOTP code, so it refuses users with
 * 2FA; `keyboard-interactive` asks "Password:" and, for those users, then "Verification code:".
 * Public keys are a second factor of their own and skip TOTP, as in AList. The guest, while enabled
 * with the SFTP permission, logs in as `guest` with no credentials at all (method `none`), as in
 * AList: it needs none on REST either.
 */
import { createHash } from 'node:crypto';
import type { AuthContext, KeyboardAuthContext, NoneAuthContext, PasswordAuthContext, PublicKeyAuthContext } from 'ssh2';
import ssh2 from 'ssh2';
import type { Logger } from 'pino';
import type { Accounts, LoginFailure, LoginResult } from '../../src/auth/accounts.js';
import { principalOf } from '../../src/auth/accounts.js';
import { can, type Principal } from '../../src/auth/principal.js';
import { findKeyOwner, touchKey } from '../../src/auth/sshkeys.js';
import type { Store } from '../../src/store/store.js';
import type { UserRecord } from '../../src/store/types.js';

const { utils } = ssh2;
const METHODS: AuthContext['method'][] = ['publickey', 'keyboard-interactive', 'password'];

/**
 * Refused attempts one connection may make before it is closed (OpenSSH's MaxAuthTries, and the
 * x/crypto default AList has). Without a bound one connection made attempts without end: each
 * unknown key or throttled password wrote a log line (200 in a second from one client) and kept
 * the connection's login timer from ever running out.
 */
export const MAX_AUTH_TRIES = 6;

export interface AuthDeps {
  store: Store;
  accounts: Accounts;
  log: Logger;
}

export class SftpAuth {
  /** Set once a method accepted; the session's identity. */
  principal?: Principal;
  /** The user record the login was accepted for (recheckLogin compares later versions to it). */
  user?: UserRecord;
  /** The registered key a publickey login used: deleting it ends the connection (recheckLogin). */
  keyId?: number;
  /**
   * Digests of the username + password pairs this connection already failed with. Clients try one
   * password by both methods (rclone: `password`, then `keyboard-interactive`; OpenSSH the other
   * way round): counted twice, one mistyped password was two failures, and rclone's retries locked
   * the IP out within a second. The same pair again is refused at once, neither checked nor
   * counted; every different pair is a new guess and counts.
   */
  private readonly failed = new Map<string, LoginFailure>();
  /** Attempts refused on this connection (MAX_AUTH_TRIES), and whether the free first `none` was used. */
  private refusals = 0;
  private noneTried = false;

  /**
   * `gone` tells whether the connection has already closed (see accept); `disconnect` ends it once
   * it made MAX_AUTH_TRIES refused attempts (`hard`: at once, without the SSH goodbye).
   */
  constructor(
    private readonly d: AuthDeps,
    private readonly ip: string,
    private readonly gone: () => boolean = () => false,
    private readonly disconnect: (hard?: boolean) => void = () => undefined,
  ) {}

  handle(ctx: AuthContext): void {
    // Requests the client sent before the connection was closed for too many refusals: not checked.
    // One coming after that (the close did not take: ssh2's end() does nothing on a socket it no
    // longer counts as writable) ends the connection at once, or the client went on guessing,
    // each guess refused unchecked (seen once in CI: 200 tries).
    if (this.refusals >= MAX_AUTH_TRIES) {
      ctx.reject(METHODS);
      return this.disconnect(true);
    }
    this.dispatch(ctx).catch((err: unknown) => {
      this.d.log.error({ err, user: ctx.username }, 'sftp authentication failed with an error');
      this.reject(ctx);
    });
  }

  /**
   * Refuse `ctx`, and close the connection once it has made MAX_AUTH_TRIES refused attempts. A
   * first `none` is free, as in x/crypto: every client sends one to learn the methods.
   */
  private reject(ctx: AuthContext): void {
    ctx.reject(METHODS);
    if (ctx.method === 'none' && !this.noneTried) {
      this.noneTried = true;
      return;
    }
    if (++this.refusals !== MAX_AUTH_TRIES) return;
    this.d.log.info({ user: ctx.username, ip: this.ip }, 'sftp: too many authentication failures, closing');
    this.disconnect();
  }

  private async dispatch(ctx: AuthContext): Promise<void> {
    switch (ctx.method) {
      case 'publickey':
        return this.publickey(ctx);
      case 'password':
        return this.password(ctx);
      case 'keyboard-interactive':
        return this.keyboard(ctx);
      case 'none':
        return this.none(ctx);
      default:
        this.reject(ctx);
    }
  }

  private accept(ctx: AuthContext, user: UserRecord, principal: Principal, method: string): void {
    // A client that hung up while its password or key was checked: ssh2 would still emit 'ready'
    // on the closed connection, after its 'close', so what 'ready' sets up (the login in the
    // users-change list, the idle timer, ssh2's keepalive) would never be undone and would keep the
    // connection's buffers (about 4.5 MB) alive. Found by a soak run with killed `sftp` clients.
    if (this.gone()) {
      this.d.log.info({ user: principal.username, ip: this.ip, method }, 'sftp login dropped: the client has gone');
      return ctx.reject(METHODS);
    }
    this.principal = principal;
    this.user = user;
    this.d.log.info({ user: principal.username, ip: this.ip, method }, 'sftp login');
    ctx.accept();
  }

  private refuse(ctx: AuthContext, reason: string): void {
    this.d.log.info({ user: ctx.username, ip: this.ip, method: ctx.method, reason }, 'sftp login refused');
    this.reject(ctx);
  }

  /** Every client tries `none` first: only the guest's is accepted, and only others' go unlogged. */
  private async none(ctx: NoneAuthContext): Promise<void> {
    const guest = await this.d.accounts.guest();
    if (!guest || ctx.username !== guest.username) return this.reject(ctx);
    const principal = principalOf(guest);
    if (principal.disabled) return this.refuse(ctx, 'disabled');
    if (!can.login(principal, 'sftp')) return this.refuse(ctx, 'protocol_denied');
    this.accept(ctx, guest, principal, 'none');
  }

  private async publickey(ctx: PublicKeyAuthContext): Promise<void> {
    if (!this.d.accounts.throttle.allow(this.ip)) return this.refuse(ctx, 'throttled');
    // Looked up on every attempt: a key deleted over REST stops working at once.
    const found = await findKeyOwner(this.d.store, ctx.username, ctx.key.data);
    if (!found) return this.refuse(ctx, 'unknown key');
    const principal = principalOf(found.user);
    if (principal.disabled) return this.refuse(ctx, 'disabled');
    if (!can.login(principal, 'sftp')) return this.refuse(ctx, 'protocol_denied');
    // No signature: the client asks whether this key would do; it signs only after we say yes.
    if (!ctx.signature || !ctx.blob) return ctx.accept();
    const key = utils.parseKey(Buffer.from(found.key.key_blob, 'base64'));
    if (key instanceof Error || Array.isArray(key) || key.verify(ctx.blob, ctx.signature, ctx.hashAlgo) !== true) {
      this.d.accounts.throttle.fail(this.ip, ctx.username);
      return this.refuse(ctx, 'bad signature');
    }
    // last_used_time is bookkeeping: a store that cannot be written (a full DATA disk) refused every
    // key login, the admin's coming to make room too, while passwords (which write nothing) worked.
    await touchKey(this.d.store, found.key.id).catch((err: unknown) => this.d.log.warn({ err, user: ctx.username }, 'sftp: could not record the key use'));
    this.d.accounts.throttle.succeed(this.ip, found.user.username, can.isAdmin(principal));
    this.keyId = found.key.id;
    this.accept(ctx, found.user, principal, 'publickey');
  }

  private async login(username: string, password: string, otp?: string): Promise<LoginResult> {
    const pair = createHash('sha256').update(username).update('\0').update(password).digest('base64');
    const before = this.failed.get(pair);
    if (before) return { ok: false, reason: before };
    const r = await this.d.accounts.authenticate({ username, password, otp, ip: this.ip, protocol: 'sftp' });
    if (!r.ok && (r.reason === 'bad_password' || r.reason === 'no_user')) this.failed.set(pair, r.reason);
    return r;
  }

  private async password(ctx: PasswordAuthContext): Promise<void> {
    const r = await this.login(ctx.username, ctx.password);
    if (r.ok) return this.accept(ctx, r.user, r.principal, 'password');
    this.refuse(ctx, r.reason === 'otp_required' ? 'otp_required (use keyboard-interactive)' : r.reason);
  }

  private async keyboard(ctx: KeyboardAuthContext): Promise<void> {
    const password = await ask(ctx, 'Password: ', false);
    if (password === undefined) return this.refuse(ctx, 'aborted');
    let r = await this.login(ctx.username, password);
    if (!r.ok && r.reason === 'otp_required') {
      // Reached only with the right password (Accounts checks it before the code).
      const code = await ask(ctx, 'Verification code: ', true);
      if (code === undefined) return this.refuse(ctx, 'aborted');
      r = await this.login(ctx.username, password, code.trim());
    }
    if (r.ok) return this.accept(ctx, r.user, r.principal, 'keyboard-interactive');
    this.refuse(ctx, r.reason);
  }
}

/**
 * Whether an SFTP login accepted for `login` still stands now that its record reads `now` (re-read
 * after a users change): the principal to go on with, or why the connection must end. The rules
 * are WebDAV's per-request re-check (accounts.ts authenticateCached): the user must exist under the
 * same name, be enabled and keep the SFTP login bit, and the password must be the one that was
 * valid at login. That is judged by salt + hash, not pwd_ts: every admin update bumps pwd_ts (to end
 * REST tokens, as AList does) and WebDAV then re-verifies the password, which still succeeds unless
 * it changed; a session cannot resend its password, but an unchanged salt + hash is the same answer.
 * Any other change (permission bits, base_path) only gives the connection the new principal.
 * A publickey login also ends when its key is gone (`keyKept` false): whoever deletes a key they
 * think leaked expects the sessions it opened to end with it.
 */
export function recheckLogin(login: UserRecord, now: UserRecord | undefined, keyKept = true): { principal: Principal } | { reason: string } {
  if (!now) return { reason: 'user deleted' };
  if (!keyKept) return { reason: 'key deleted' };
  if (now.username !== login.username) return { reason: 'user renamed' };
  if (now.salt !== login.salt || now.pwd_hash !== login.pwd_hash) return { reason: 'password changed' };
  const principal = principalOf(now);
  if (principal.disabled) return { reason: 'disabled' };
  if (!can.login(principal, 'sftp')) return { reason: 'protocol_denied' };
  return { principal };
}

/** One keyboard-interactive prompt; undefined when the client aborted or answered nothing. */
function ask(ctx: KeyboardAuthContext, prompt: string, echo: boolean): Promise<string | undefined> {
  return new Promise((resolve) => {
    ctx.prompt([{ prompt, echo }], 'treegate', (answers: string[] | Error) => {
      resolve(Array.isArray(answers) ? answers[0] : undefined);
    });
  });
}
