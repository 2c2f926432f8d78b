/**
 * AList's path signs (alist-compat §9): `base64url_with_padding(HMAC-SHA256(key, "<path>:<expire>")) + ":" + expire`,
 * where `path` is the absolute virtual path (base path included), `expire` is unix seconds or `0`
 * for "never", and `key` is the `token` setting. Shared by REST (/d, /p, list/get) and WebDAV
 * (use_proxy_url redirects), so the wire form is written down exactly once.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Minimal view of the settings the signer reads (src/settings/settings.ts satisfies it). */
export interface SignSettings {
  get(key: string): string;
  number(key: string): number;
}

/** The exact messages AList answers (code 401) when a sign does not verify. */
export type SignFailure = 'expire missing' | 'expire invalid' | 'sign expired' | 'sign invalid';

function mac(key: string, path: string, expire: number): string {
  // Go's base64.URLEncoding keeps the `=` padding; Node's base64url drops it.
  return createHmac('sha256', key).update(`${path}:${expire}`).digest('base64').replace(/\+/g, '-').replace(/\//g, '_');
}

/** Sign `path` with an explicit expiry (unix seconds, 0 = never). */
export function signWith(key: string, path: string, expire: number): string {
  return `${mac(key, path, expire)}:${expire}`;
}

/** Sign `path` the way the server hands signs out: key = `token`, expiry from `link_expiration` hours. */
export function signPath(settings: SignSettings, path: string, nowMs = Date.now()): string {
  const hours = settings.number('link_expiration');
  const expire = hours > 0 ? Math.floor(nowMs / 1000) + Math.floor(hours * 3600) : 0;
  return signWith(settings.get('token'), path, expire);
}

/** Check a sign for `path`; undefined when valid, else AList's failure message. */
export function verifySign(key: string, path: string, sign: string, nowMs = Date.now()): SignFailure | undefined {
  const cut = sign.lastIndexOf(':');
  const expText = cut < 0 ? sign : sign.slice(cut + 1);
  if (expText === '') return 'expire missing';
  if (!/^[+-]?\d+$/.test(expText)) return 'expire invalid';
  const expire = Number(expText);
  if (!Number.isSafeInteger(expire)) return 'expire invalid';
  if (expire !== 0 && Math.floor(nowMs / 1000) > expire) return 'sign expired';
  const want = Buffer.from(signWith(key, path, expire));
  const got = Buffer.from(sign);
  if (want.length !== got.length || !timingSafeEqual(want, got)) return 'sign invalid';
  return undefined;
}
