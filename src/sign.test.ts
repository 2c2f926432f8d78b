import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { signPath, signWith, verifySign } from './sign.js';

describe('sign', () => {
  it('is AList form: padded base64url HMAC-SHA256 of "<path>:<expire>", then ":<expire>"', () => {
    const mac = createHmac('sha256', 'k').update('/a/b.txt:0').digest('base64').replace(/\+/g, '-').replace(/\//g, '_');
    expect(signWith('k', '/a/b.txt', 0)).toBe(`${mac}:0`);
    expect(signWith('k', '/a/b.txt', 0)).toMatch(/^[A-Za-z0-9_-]{43}=:0$/);
  });

  it('takes the expiry from link_expiration hours', () => {
    const s = { get: () => 'k', number: () => 2 };
    expect(signPath(s, '/x', 1_000_000)).toBe(signWith('k', '/x', 1000 + 7200));
    expect(signPath({ get: () => 'k', number: () => 0 }, '/x')).toMatch(/:0$/);
  });

  it('verifies with AList messages', () => {
    const now = 2_000_000_000_000;
    expect(verifySign('k', '/x', signWith('k', '/x', 0), now)).toBeUndefined();
    expect(verifySign('k', '/x', '', now)).toBe('expire missing');
    expect(verifySign('k', '/x', 'abc:', now)).toBe('expire missing');
    expect(verifySign('k', '/x', 'abc:1.5', now)).toBe('expire invalid');
    expect(verifySign('k', '/x', signWith('k', '/x', 5), now)).toBe('sign expired');
    expect(verifySign('k', '/y', signWith('k', '/x', 0), now)).toBe('sign invalid');
    expect(verifySign('other', '/x', signWith('k', '/x', 0), now)).toBe('sign invalid');
    const future = now / 1000 + 60;
    expect(verifySign('k', '/x', signWith('k', '/x', future), now)).toBeUndefined();
  });
});
