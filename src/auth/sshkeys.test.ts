import { describe, expect, it } from 'vitest';
import { generateKeyPairSync } from 'node:crypto';
import { fingerprintOf, parseAuthorizedKey } from './sshkeys.js';

// A structurally valid ed25519 public key line (type string + 32-byte key).
const ED = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl';
const ED_BLOB = Buffer.from(ED.split(' ')[1]!, 'base64');

/** `ssh-ed25519 <blob>` for a new key: the wire blob is string(type) + string(32-byte public key). */
function freshEd25519Line(): string {
  const x = Buffer.from(generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x!, 'base64url');
  const str = (b: Buffer) => Buffer.concat([Buffer.from([0, 0, 0, b.length]), b]);
  return `ssh-ed25519 ${Buffer.concat([str(Buffer.from('ssh-ed25519')), str(x)]).toString('base64')}`;
}

describe('parseAuthorizedKey', () => {
  it('parses a bare key and keeps the exact wire blob', () => {
    const k = parseAuthorizedKey(ED)!;
    expect(k.type).toBe('ssh-ed25519');
    expect(k.blob.equals(ED_BLOB)).toBe(true);
    expect(k.fingerprint).toBe(fingerprintOf(ED_BLOB));
    expect(k.fingerprint).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/);
  });

  it('accepts comments, options with quoted spaces, CRLF, and skips # and blank lines', () => {
    for (const text of [`${ED} me@host`, `  ${ED}\t comment with spaces `, `# c\r\n\r\nno-pty,command="a b c" ${ED} x`, `bad line\n${ED}`]) {
      expect(parseAuthorizedKey(text)?.blob.equals(ED_BLOB), text).toBe(true);
    }
  });

  it('uses the first valid key only', () => {
    const other = freshEd25519Line();
    expect(parseAuthorizedKey(other)?.type).toBe('ssh-ed25519');
    expect(parseAuthorizedKey(`${ED}\n${other}`)!.blob.equals(ED_BLOB)).toBe(true);
    expect(parseAuthorizedKey(`${other}\n${ED}`)!.blob.equals(ED_BLOB)).toBe(false);
  });

  it('refuses private keys, certificates, DSA, truncated data and type mismatches', () => {
    const pem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    for (const text of [
      pem, '-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----', '', '# only\n\n',
      `ssh-ed25519-cert-v01@openssh.com ${ED.split(' ')[1]}`, `ssh-dss ${ED.split(' ')[1]}`, `ssh-rsa ${ED.split(' ')[1]}`,
      `ssh-ed25519 ${ED.split(' ')[1]!.slice(0, 40)}`, 'ssh-ed25519 !!!!', `ssh-ed25519 ${ED_BLOB.toString('base64')}AAAA`,
    ]) {
      expect(parseAuthorizedKey(text), text.slice(0, 40)).toBeUndefined();
    }
  });
});

