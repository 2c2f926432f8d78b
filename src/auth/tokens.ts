/**
 * Login tokens: HS256 JWTs (jose) with AList's claims (username, pwd_ts, exp, nbf, iat) plus a jti.
 * Stateless, so they survive a restart; they die on expiry, on logout (jti in the store's
 * revocation list until exp), and when the user's pwd_ts changes (checked by the caller against
 * the user record, together with disabled/deleted).
 */
import { randomUUID } from 'node:crypto';
import { SignJWT, jwtVerify, errors as joseErrors } from 'jose';
import type { Store } from '../store/store.js';
import type { UserRecord } from '../store/types.js';

export interface TokenClaims {
  /** The user's id: a new user who later takes a deleted user's name never inherits its tokens. */
  uid: number;
  username: string;
  pwdTs: number;
  jti: string;
  exp: number;
}

/** Logged-out tokens remembered per user; past it a logout ends all of the user's tokens (revoke). */
export const MAX_REVOKED_PER_USER = 64;

export type TokenCheck = { ok: true; claims: TokenClaims } | { ok: false; message: string };

export class Tokens {
  private readonly key: Uint8Array;

  constructor(secret: string, private readonly expiresHours: number, private readonly store: Store) {
    this.key = new TextEncoder().encode(secret);
  }

  async issue(user: UserRecord): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ username: user.username, pwd_ts: user.pwd_ts, uid: user.id })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setJti(randomUUID())
      .setIssuedAt(now)
      .setNotBefore(now)
      .setExpirationTime(now + Math.round(this.expiresHours * 3600))
      .sign(this.key);
  }

  /** Verify signature (HS256 only), time claims and revocation. Messages are AList's. */
  async verify(token: string): Promise<TokenCheck> {
    try {
      const { payload } = await jwtVerify(token, this.key, { algorithms: ['HS256'] });
      const { username, pwd_ts, uid, jti, exp } = payload as Record<string, unknown>;
      if (typeof username !== 'string' || typeof pwd_ts !== 'number' || typeof uid !== 'number' || typeof jti !== 'string' || typeof exp !== 'number') {
        return { ok: false, message: "couldn't handle this token" };
      }
      if (await this.store.revokedTokens.has(jti)) return { ok: false, message: 'token is invalidated' };
      return { ok: true, claims: { uid, username, pwdTs: pwd_ts, jti, exp } };
    } catch (e) {
      if (e instanceof joseErrors.JWTExpired) return { ok: false, message: 'token is expired' };
      if (e instanceof joseErrors.JWTClaimValidationFailed && e.claim === 'nbf') return { ok: false, message: 'token not active yet' };
      return { ok: false, message: 'token is invalidated' };
    }
  }

  /**
   * Logout: the token stays refused until it would have expired anyway. False, with nothing stored,
   * when the user already has MAX_REVOKED_PER_USER tokens refused this way: the caller then ends all
   * of the user's tokens at once (a new pwd_ts). Each entry is kept in the store, written whole on
   * every change, for token_expires_in: a login + logout loop (10 a second here, the guest's too when
   * it is enabled) grew it without bound, by 1.8 million entries in the default 48 hours.
   */
  async revoke(claims: TokenClaims): Promise<boolean> {
    await this.store.revokedTokens.purge(Math.floor(Date.now() / 1000));
    if ((await this.store.revokedTokens.countOf(claims.uid)) >= MAX_REVOKED_PER_USER) return false;
    await this.store.revokedTokens.add({ id: claims.jti, exp: claims.exp, uid: claims.uid });
    return true;
  }
}
