/**
 * HTTP validators and single byte ranges for streamed downloads, following Go's http.ServeContent
 * as AList uses it: ETag `"<hex mtime seconds>-<hex size>"`, Last-Modified, If-Match /
 * If-Unmodified-Since → 412, If-None-Match / If-Modified-Since → 304, If-Range, Range → 206 or 416.
 * A multi-range request is answered with the whole file (200), which RFC 9110 allows; a malformed
 * Range header is ignored, one whose end is before its start is 416 (as Go's).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { knownModTime, parseHttpDate } from '../http-date.js';

export function etagOf(modified: Date, size: number): string {
  return `"${Math.floor(modified.getTime() / 1000).toString(16)}-${size.toString(16)}"`;
}

const seconds = (d: Date) => Math.floor(d.getTime() / 1000);

function header(h: IncomingHttpHeaders, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

function etagListMatches(list: string, etag: string, weak: boolean): boolean {
  return list.split(',').some((raw) => {
    const t = raw.trim();
    if (t === '*') return true;
    const a = weak ? t.replace(/^W\//, '') : t;
    return a === (weak ? etag.replace(/^W\//, '') : etag) && !(!weak && t.startsWith('W/'));
  });
}

/**
 * True when If-Match (no strong match, `*` aside) or, without it, If-Unmodified-Since (the file
 * changed since) fails: answer 412, as Go's checkPreconditions does. A client resuming a download
 * with these must not get bytes of a file that changed in between.
 */
export function preconditionFailed(h: IncomingHttpHeaders, etag: string, modified: Date): boolean {
  const im = header(h, 'if-match');
  if (im !== undefined && im.trim() !== '') return !etagListMatches(im, etag, false);
  const t = parseHttpDate(header(h, 'if-unmodified-since')); // not a valid HTTP-date: ignored
  return t !== undefined && knownModTime(modified) && seconds(modified) > t / 1000;
}

/** True when the client's cached copy is current (answer 304 to GET/HEAD). */
export function notModified(h: IncomingHttpHeaders, etag: string, modified: Date): boolean {
  const inm = header(h, 'if-none-match');
  if (inm !== undefined) return etagListMatches(inm, etag, true);
  const t = parseHttpDate(header(h, 'if-modified-since')); // not a valid HTTP-date: ignored
  return t !== undefined && knownModTime(modified) && seconds(modified) <= t / 1000;
}

export type RangePlan = { kind: 'full' } | { kind: 'partial'; start: number; end: number } | { kind: 'unsatisfiable' };

/** Decide what to send for a Range header (If-Range applied first). */
export function planRange(h: IncomingHttpHeaders, size: number, etag: string, modified: Date): RangePlan {
  const range = header(h, 'range');
  if (!range) return { kind: 'full' };
  // No range can overlap an empty file; Go's ServeContent (AList) then ignores the header and
  // answers 200, since clients (players, download managers) send `bytes=0-` with every request.
  if (size === 0) return { kind: 'full' };
  const ifRange = header(h, 'if-range');
  if (ifRange !== undefined) {
    const v = ifRange.trim();
    const fresh = v.startsWith('"') || v.startsWith('W/') ? v === etag : knownModTime(modified) && parseHttpDate(v) === seconds(modified) * 1000;
    if (!fresh) return { kind: 'full' };
  }
  // Linear in the header's length: `\s*(\d*)\s*-` tried every split of a run of spaces, so a 15 KB
  // header of spaces held the event loop about 0.3 s per request (any client that can read a file).
  const m = /^bytes=\s*(?:(\d+)\s*)?-\s*(\d*)$/.exec(range.trim());
  if (!m) return { kind: 'full' };
  const a = m[1] ?? '';
  const b = m[2]!;
  if (a === '' && b === '') return { kind: 'full' };
  if (a === '') {
    const n = Number(b);
    if (n === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(a);
  // An end before the start is a range Go's parseRange calls invalid: ServeContent (AList) answers
  // 416, as WebDAV here does (served whole, the same file answered 200 on /d and 416 on /dav).
  if (b !== '' && Number(b) < start) return { kind: 'unsatisfiable' };
  if (start >= size) return { kind: 'unsatisfiable' };
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  return { kind: 'partial', start, end };
}
