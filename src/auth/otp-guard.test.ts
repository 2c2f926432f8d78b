/** The per-account limit on 2FA code guesses (otp-guard.ts), on a clock of its own. */
import { describe, expect, it } from 'vitest';
import { FIRST_OTP_LOCK_MS, MAX_OTP_FAILURES, MAX_OTP_LOCK_MS, OtpGuard } from './otp-guard.js';

function guard() {
  const clock = { t: 1_000_000 };
  return { g: new OtpGuard(() => clock.t), clock };
}
const failTimes = (g: OtpGuard, n: number, user = 1, pwdTs = 1) => {
  for (let i = 0; i < n; i++) g.fail(user, pwdTs);
};

describe('OtpGuard', () => {
  it('locks a user after MAX_OTP_FAILURES wrong codes in a row, for FIRST_OTP_LOCK_MS', () => {
    const { g, clock } = guard();
    failTimes(g, MAX_OTP_FAILURES - 1);
    expect(g.allow(1, 1)).toBe(true);
    g.fail(1, 1);
    expect(g.allow(1, 1)).toBe(false);
    expect(g.allow(2, 1)).toBe(true); // another user is not touched
    clock.t += FIRST_OTP_LOCK_MS - 1;
    expect(g.allow(1, 1)).toBe(false);
    clock.t += 1;
    expect(g.allow(1, 1)).toBe(true);
  });

  it('doubles the lock with each lockout, up to MAX_OTP_LOCK_MS', () => {
    const { g, clock } = guard();
    const locks: number[] = [];
    for (let k = 0; k < 12; k++) {
      failTimes(g, MAX_OTP_FAILURES);
      let ms = 0;
      while (!g.allow(1, 1)) (clock.t += 60_000), (ms += 60_000);
      locks.push(ms);
    }
    expect(locks.slice(0, 4)).toEqual([1, 2, 4, 8].map((x) => x * FIRST_OTP_LOCK_MS));
    expect(Math.max(...locks)).toBe(MAX_OTP_LOCK_MS);
    expect(locks.at(-1)).toBe(MAX_OTP_LOCK_MS);
  });

  it('forgets a user on an accepted code, and starts over with a new password', () => {
    const { g } = guard();
    failTimes(g, MAX_OTP_FAILURES - 1);
    g.succeed(1);
    g.fail(1, 1);
    expect(g.allow(1, 1)).toBe(true); // one failure since the success, not MAX_OTP_FAILURES
    failTimes(g, MAX_OTP_FAILURES);
    expect(g.allow(1, 1)).toBe(false);
    expect(g.allow(1, 2)).toBe(true); // pwd_ts moved on: the lock was the old password's
    g.fail(1, 2);
    expect(g.allow(1, 2)).toBe(true);
  });
});
