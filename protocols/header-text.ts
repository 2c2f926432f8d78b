/**
 * Header values as the client meant them. Node hands header values over as latin1 text (one char
 * per byte), while clients that do not percent-encode (curl with a literal `ü`, Go's net/http) send
 * UTF-8 bytes; AList reads those bytes as UTF-8 (Go strings are bytes). Shared by REST and WebDAV.
 */

/** The header value decoded as UTF-8 when it carries raw bytes above ASCII; ASCII stays as is. */
export function utf8Header(value: string): string {
  // eslint-disable-next-line no-control-regex
  if (!/[^\x00-\x7f]/.test(value)) return value;
  return Buffer.from(value, 'latin1').toString('utf8');
}
