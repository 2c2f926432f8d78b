/**
 * TOTP set-up data in AList's exact shape (pquerna/otp defaults): SHA1, 6 digits, 30 s, a 20-byte
 * secret in unpadded base32 (32 characters), issuer `Alist`, and a 400x400 PNG QR code of the
 * otpauth URL. Checking codes is `checkTotp` in accounts.ts (the login decision lives there).
 */
import { authenticator } from 'otplib';

export const TOTP_ISSUER = 'Alist';
const SECRET_BYTES = 20;

export function newTotpSecret(): string {
  return authenticator.generateSecret(SECRET_BYTES);
}

/** A base32 secret as generated above (what /api/auth/2fa/verify may store). */
export function isTotpSecret(s: string): boolean {
  return /^[A-Z2-7]{16,128}$/.test(s);
}

/** `otpauth://totp/Alist:<user>?algorithm=SHA1&digits=6&issuer=Alist&period=30&secret=<S>` (keys sorted as Go encodes them). */
export function otpauthUrl(username: string, secret: string): string {
  const label = encodeURIComponent(`${TOTP_ISSUER}:${username}`).replace(/%3A/g, ':').replace(/%40/g, '@');
  const query = new URLSearchParams({ algorithm: 'SHA1', digits: '6', issuer: TOTP_ISSUER, period: '30', secret });
  return `otpauth://totp/${label}?${query.toString()}`;
}

/**
 * `data:image/png;base64,...` of a 400x400 QR code. The QR library is loaded on first use: most
 * servers never generate a 2FA secret, and every module loaded at start stays in memory for good.
 */
export async function qrDataUrl(text: string): Promise<string> {
  const { default: QRCode } = await import('qrcode');
  return QRCode.toDataURL(text, { type: 'image/png', width: 400 });
}
