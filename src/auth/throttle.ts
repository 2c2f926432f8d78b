/**
 * Login throttling per client IP (an IPv6 client per /64, see ipKey), one instance shared by REST,
 * WebDAV and SFTP (AList's rule): failures accumulate; from the 6th attempt on every attempt is
 * refused and re-arms a 5-minute lock; 5 quiet minutes forget the IP; a success clears it, if it is
 * the admin's or the failures were all for the user who succeeded (see succeed).
 */
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';

export const MAX_FAILURES = 5;
export const LOCK_MS = 5 * 60 * 1000;
/**
 * Addresses tracked at most. Past it, those whose last failure is oldest are forgotten (a tenth at a
 * time): a client with many addresses (an IPv6 /48 holds 65,536 /64s) made the map grow without end,
 * and every failure past 100,000 live entries walked them all (30,000 more failures: 68 s of CPU).
 */
export const MAX_TRACKED = 100_000;

/**
 * The counter's key for a client address. A socket listening on `::` reports an IPv4 client as
 * `::ffff:a.b.c.d` (REST and SFTP pass that on) while WebDAV strips the prefix: without one form the
 * protocols would count the same client under two keys.
 *
 * An IPv6 client is counted per /64 network: one host or home line holds at least a /64 and may
 * pick any address in it, so a per-address key gave every guess a fresh counter (2^64 of them).
 * IPv6 addresses carrying an IPv4 address (mapped, NAT64) stay per address: each is one IPv4 client.
 * A NAT64 / SIIT address (64:ff9b::/96) is keyed by its IPv4 client however it is spelled: a socket
 * (inet_ntop) and a proxy write it in hex (`64:ff9b::c000:201`), and keyed per /64 every IPv4
 * client of the translator shared one counter, so one of them locked all the others out.
 */
export function ipKey(ip: string): string {
  if (ip.startsWith('::ffff:') && ip.includes('.')) return ip.slice('::ffff:'.length);
  return ip.includes(':') ? ipv6Key(ip) : ip;
}

/** The eight 16-bit groups of an IPv6 address (a trailing dotted IPv4 part is two of them). */
function ipv6Groups(addr: string): number[] {
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(addr);
  const text = v4 ? addr.slice(0, v4.index) + [((+v4[1]! << 8) | +v4[2]!).toString(16), ((+v4[3]! << 8) | +v4[4]!).toString(16)].join(':') : addr;
  const cut = text.indexOf('::');
  if (cut < 0) return text.split(':').map((g) => parseInt(g, 16));
  const head = cut === 0 ? [] : text.slice(0, cut).split(':');
  const tail = text.slice(cut + 2) === '' ? [] : text.slice(cut + 2).split(':');
  return [...head, ...Array<string>(8 - head.length - tail.length).fill('0'), ...tail].map((g) => parseInt(g, 16));
}

/**
 * `a:b:c:d::/64` (lowercase, no leading zeros) of an IPv6 address, `64:ff9b::a.b.c.d` of a NAT64 one;
 * the input itself when it is not one.
 */
function ipv6Key(ip: string): string {
  const addr = ip.split('%', 1)[0]!; // a zone id (fe80::1%eth0) is not part of the address
  if (isIP(addr) !== 6) return ip;
  const g = ipv6Groups(addr);
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) {
    return `64:ff9b::${g[6]! >> 8}.${g[6]! & 255}.${g[7]! >> 8}.${g[7]! & 255}`;
  }
  if (addr.includes('.')) return ip; // other IPv6 forms carrying an IPv4 address: per address
  const net = g.slice(0, 4).map((x) => x.toString(16)).join(':');
  // ::/64 holds no client network, only special forms (::1, IPv4 written in hex): keep those whole.
  return net === '0:0:0:0' ? ip : `${net}::/64`;
}

export class LoginThrottle {
  /**
   * Per IP: failures, when they are forgotten, and the one user they were all for (a digest: the
   * name comes from the client and may be long), or null when they were for several.
   */
  private readonly entries = new Map<string, { failures: number; until: number; user: string | null }>();
  /** Per IP, the end of the attempts queued by serially(). */
  private readonly queues = new Map<string, Promise<void>>();

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * Run one login attempt of `ip` after those it already has running. A password check takes tens
   * of milliseconds (scrypt) and allow() sees only failures already counted, so attempts sent in
   * parallel would all pass it before the first failure counts, and the limit would not hold.
   */
  serially<T>(ip: string, attempt: () => Promise<T>): Promise<T> {
    const key = ipKey(ip);
    const run = (this.queues.get(key) ?? Promise.resolve()).then(attempt);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(key, tail);
    void tail.then(() => {
      if (this.queues.get(key) === tail) this.queues.delete(key);
    });
    return run;
  }

  /** True when this IP may try now. A refused attempt extends the lock. */
  allow(ip: string): boolean {
    // Asked on every WebDAV request (Accounts.cachedLogin): no failures anywhere is the common case.
    if (this.entries.size === 0) return true;
    ip = ipKey(ip);
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

  fail(ip: string, username: string): void {
    ip = ipKey(ip);
    const user = digest(username);
    const e = this.entries.get(ip) ?? { failures: 0, until: 0, user };
    e.failures += 1;
    if (e.user !== user) e.user = null;
    e.until = this.now() + LOCK_MS;
    // Re-inserted, so the map's order is the order of last failures (the oldest first).
    this.entries.delete(ip);
    this.entries.set(ip, e);
    if (this.entries.size > MAX_TRACKED) this.trim();
  }

  /**
   * A login of `username` succeeded. It clears the IP's failures when they were all for that user (a
   * mistyped password) or when it is the admin (who has nothing left to guess). Any other login (the
   * guest's, whose password is public; an insider's own account) must not reset the count between
   * guesses at another account, or guessing would go on forever, four at a time.
   */
  succeed(ip: string, username: string, isAdmin: boolean): void {
    ip = ipKey(ip);
    const e = this.entries.get(ip);
    if (e && (isAdmin || e.user === digest(username))) this.entries.delete(ip);
  }

  /** Drop the oldest entries (expired ones come first) down to nine tenths of MAX_TRACKED. */
  private trim(): void {
    for (const ip of this.entries.keys()) {
      if (this.entries.size <= MAX_TRACKED * 0.9) return;
      this.entries.delete(ip);
    }
  }
}

function digest(username: string): string {
  return createHash('sha256').update(username).digest('base64');
}
