/**
 * Password storage. AList clients may log in with the "static hash" (SHA-256 of the password plus
 * AList's fixed address), so that is what we verify against; we store a slow scrypt of it with a
 * per-user salt instead of AList's fast double SHA-256. Comparisons are constant-time.
 */
import { createHash, randomBytes, scrypt as scryptCb, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

const scrypt = promisify(scryptCb) as (pw: string | Buffer, salt: string | Buffer, keylen: number, opts: object) => Promise<Buffer>;

/** AList's fixed salt for the static hash (unchanged in OpenList). */
export const STATIC_HASH_SALT = 'https://github.com/alist-org/alist';

/** N=2^15, r=8, p=1: about 30-60 ms here; memory 32 MiB (maxmem raised accordingly). */
const SCRYPT = { N: 1 << 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };
const KEY_LEN = 32;

/** lowercase hex SHA-256 of `password-<AList address>`: what /api/auth/login/hash receives. */
export function staticHash(plain: string): string {
  return createHash('sha256').update(`${plain}-${STATIC_HASH_SALT}`, 'utf8').digest('hex');
}

export function newSalt(): string {
  return randomBytes(16).toString('base64url');
}

/** The stored form for a static hash: `scrypt$<hex>`. */
export async function hashStatic(staticHashed: string, salt: string): Promise<string> {
  const key = await scrypt(staticHashed, salt, KEY_LEN, SCRYPT);
  return `scrypt$${key.toString('hex')}`;
}

export async function hashPassword(plain: string, salt: string): Promise<string> {
  return hashStatic(staticHash(plain), salt);
}

/** Constant-time check of a static hash against the stored value. */
export async function verifyStatic(staticHashed: string, salt: string, stored: string): Promise<boolean> {
  if (!stored.startsWith('scrypt$')) return false;
  const expected = Buffer.from(stored.slice('scrypt$'.length), 'hex');
  const got = await scrypt(staticHashed, salt, KEY_LEN, SCRYPT);
  return expected.length === got.length && timingSafeEqual(expected, got);
}

/** Constant-time equality of two strings of any length (e.g. API tokens, meta passwords). */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}

/** A random password of `len` characters from [A-Za-z0-9] (admin random, first start). */
export function randomPassword(len = 12): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  const bytes = randomBytes(len * 2);
  let out = '';
  for (const b of bytes) {
    if (b >= 248) continue; // 248 = 62*4: keep the distribution uniform
    out += alphabet[b % 62];
    if (out.length === len) break;
  }
  return out.length === len ? out : randomPassword(len);
}
