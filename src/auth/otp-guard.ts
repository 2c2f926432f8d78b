/**
 * A limit on guessing a user's 2FA codes, per account. The login throttle counts per client address
 * (throttle.ts), so whoever holds a user's password could guess codes from many addresses: five per
 * address every five minutes, each guess right about 3 times in a million (three time steps are
 * accepted). Here, after MAX_OTP_FAILURES wrong codes in a row, code attempts for that user are
 * refused for a lock that doubles with each lockout (5 minutes up to a day), until a code is
 * accepted or the password changes. At the cap that is five guesses a day.
 *
 * Only a login that gave the right password reaches a code check, so only a holder of the password
 * can lock the account's logins this way, and a new password ends the lock. Bounded by the number of
 * users (one record per user whose password was given right).
 */
export const MAX_OTP_FAILURES = 5;
export const FIRST_OTP_LOCK_MS = 5 * 60 * 1000;
export const MAX_OTP_LOCK_MS = 24 * 60 * 60 * 1000;

interface Record {
  /** The password generation the failures were made with: a new password starts over. */
  pwdTs: number;
  failures: number;
  lockouts: number;
  until: number;
}

export class OtpGuard {
  private readonly users = new Map<number, Record>();

  constructor(private readonly now: () => number = Date.now) {}

  /** True when a code may be checked for this user now. */
  allow(userId: number, pwdTs: number): boolean {
    const r = this.current(userId, pwdTs);
    return !r || this.now() >= r.until;
  }

  /** A wrong code (or one already used): the fifth in a row locks the user's code attempts. */
  fail(userId: number, pwdTs: number): void {
    let r = this.current(userId, pwdTs);
    if (!r) this.users.set(userId, (r = { pwdTs, failures: 0, lockouts: 0, until: 0 }));
    if (++r.failures < MAX_OTP_FAILURES) return;
    r.until = this.now() + Math.min(FIRST_OTP_LOCK_MS * 2 ** r.lockouts, MAX_OTP_LOCK_MS);
    r.lockouts++;
    r.failures = 0;
  }

  /** A code was accepted: the user's record is forgotten. */
  succeed(userId: number): void {
    this.users.delete(userId);
  }

  private current(userId: number, pwdTs: number): Record | undefined {
    const r = this.users.get(userId);
    if (r && r.pwdTs !== pwdTs) {
      this.users.delete(userId);
      return undefined;
    }
    return r;
  }
}
