/**
 * Login throttling per client IP, one instance shared by REST, WebDAV and SFTP (AList's rule):
 * failures accumulate; from the 6th attempt on every attempt is refused and re-arms a 5-minute
 * lock; 5 quiet minutes forget the IP; a success clears it.
 */
export const MAX_FAILURES = 5;
export const LOCK_MS = 5 * 60 * 1000;

export class LoginThrottle {
  private readonly entries = new Map<string, { failures: number; until: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** True when this IP may try now. A refused attempt extends the lock. */
  allow(ip: string): boolean {
    const e = this.entries.get(ip);
    if (!e) return true;
    const t = this.now();
    if (e.until && t > e.until) {
      this.entries.delete(ip);
      return true;
    }
    if (e.failures >= MAX_FAILURES) {
      e.until = t + LOCK_MS;
      return false;
    }
    return true;
  }

  fail(ip: string): void {
    const e = this.entries.get(ip) ?? { failures: 0, until: 0 };
    e.failures += 1;
    e.until = this.now() + LOCK_MS;
    this.entries.set(ip, e);
    if (this.entries.size > 100_000) this.sweep();
  }

  succeed(ip: string): void {
    this.entries.delete(ip);
  }

  private sweep(): void {
    const t = this.now();
    for (const [ip, e] of this.entries) if (t > e.until) this.entries.delete(ip);
  }
}
