/**
 * Header values as the client meant them. Node hands header values over as latin1 text (one char
 * per byte), while clients that do not percent-encode (curl with a literal `ü`, Go's net/http) send
 * UTF-8 bytes; AList reads those bytes as UTF-8 (Go strings are bytes). Shared by REST and WebDAV.
 */
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { VfsError } from '../src/errors.js';

/**
 * The header value decoded as UTF-8 when it carries raw bytes above ASCII; ASCII stays as is. Bytes
 * that are not UTF-8 (a Latin-1 client's `é`) are refused (INVALID: 400) rather than decoded into
 * U+FFFD, which would give different names one file.
 */
export function utf8Header(value: string): string {
  // eslint-disable-next-line no-control-regex
  if (!/[^\x00-\x7f]/.test(value)) return value;
  const bytes = Buffer.from(value, 'latin1');
  if (!isUtf8(bytes)) throw new VfsError('INVALID', 'header is not valid UTF-8');
  return bytes.toString('utf8');
}

/**
 * A request header's first value, as Go's Header.Get reads it (Node joins a repeated header into one
 * `a, b` string in `req.headers`). `headersDistinct` parses every header again, so it is read only
 * when the header is there at all: on the path of every upload, most of which do not carry it.
 */
export function firstHeader(req: IncomingMessage, name: string): string | undefined {
  return req.headers[name] === undefined ? undefined : req.headersDistinct[name]?.[0];
}
