/**
 * Security probe: the login throttle keyed IPv6 clients by their full address. One IPv6 client
 * holds at least a /64 (2^64 addresses, a home line often a /56), so rotating the interface part
 * gave every guess a fresh counter: unlimited password (and 2FA code) guessing. The throttle now
 * counts an IPv6 client per /64 network; IPv4, and IPv4 carried in IPv6 (::ffff:a.b.c.d,
 * NAT64), stay per address.
 *
 * A trusted proxy passes the client's address in X-Forwarded-For here, since a test cannot bind
 * many IPv6 addresses; a client reaching the listener directly is keyed by the same function.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davRequest } from './clients/webdav.js';
import { ipKey } from '../src/auth/throttle.js';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false', TREEGATE_TRUSTED_PROXIES: '127.0.0.1' } });
});
afterAll(async () => {
  await s?.close();
});

const restLogin = (password: string, client: string) =>
  s.api('/api/auth/login', { body: { username: 'admin', password }, headers: { 'x-forwarded-for': client } });

describe('an IPv6 client rotating addresses inside its /64', () => {
  it('is locked out after 5 failures over REST and WebDAV, as one client', async () => {
    const codes: number[] = [];
    for (let i = 1; i <= 3; i++) codes.push((await restLogin(`guess-${i}`, `2001:db8:1:2::${i.toString(16)}`)).code);
    for (let i = 4; i <= 5; i++) {
      const r = await davRequest(s.url, 'PROPFIND', '/dav/', {
        user: 'admin', password: `guess-${i}`, headers: { depth: '0', 'x-forwarded-for': `2001:db8:1:2:${i}:a:b:c` },
      });
      codes.push(r.status);
    }
    // The sixth attempt, right password, yet another address of the same /64 (written in full).
    codes.push((await restLogin(ADMIN_PASSWORD, '2001:0db8:0001:0002:ffff:ffff:ffff:fffe')).code);
    expect(codes).toEqual([400, 400, 400, 401, 401, 429]);
    // Another /64 is another client.
    expect((await restLogin(ADMIN_PASSWORD, '2001:db8:1:3::1')).code).toBe(200);
  });
});

describe('ipKey', () => {
  it('keys IPv6 by /64 in every spelling, IPv4 (also mapped or NAT64) by address', () => {
    const k = ipKey('2001:db8:1:2::1');
    for (const same of ['2001:db8:1:2::ffff', '2001:DB8:1:2:0:0:0:5', '2001:0db8:0001:0002:abcd::', '2001:db8:1:2::1%eth0']) expect(ipKey(same)).toBe(k);
    expect(ipKey('2001:db8:1:3::1')).not.toBe(k);
    expect(ipKey('2001:db8::1')).toBe(ipKey('2001:db8:0:0:1::'));
    expect(ipKey('::1')).toBe('::1');
    expect(ipKey('::ffff:c000:201')).not.toBe(ipKey('::ffff:c000:202'));
    expect(ipKey('::ffff:192.0.2.1')).toBe('192.0.2.1');
    expect(ipKey('192.0.2.1')).toBe('192.0.2.1');
    expect(ipKey('64:ff9b::192.0.2.1')).not.toBe(ipKey('64:ff9b::192.0.2.2'));
    expect(ipKey('')).toBe('');
  });
});
