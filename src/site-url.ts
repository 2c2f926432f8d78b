/**
 * The path part of `site_url` (AList's key): treegate served under a sub-path behind a reverse
 * proxy. Here in the core so the config refuses a bad value before anything is created, and the
 * HTTP edge (protocols/rest/frontend/base-path.ts) and the front-end page use the same answer.
 */
import { normalize } from './paths.js';

/**
 * The base path of a site_url, `` or `/seg[/seg…]` (kept percent-encoded, as in request URLs).
 * Throws the reason (for the config's message) when site_url is not usable.
 */
export function basePathOf(siteUrl: string): string {
  let p = siteUrl.trim();
  const isUrl = /^[a-z][a-z0-9+.-]*:\/\//i.test(p);
  if (isUrl) {
    try {
      p = new URL(p).pathname;
    } catch {
      throw new Error(`not a valid URL, got ${JSON.stringify(siteUrl)}`);
    }
  }
  let base: string;
  try {
    base = normalize(p);
  } catch {
    throw new Error(`its path must not contain .. or backslashes, got ${JSON.stringify(siteUrl)}`);
  }
  // A bare path is taken as typed (`/my files`, `/über`), while request URLs carry it percent-encoded
  // as the URL parser above gives it for the URL form (`/my%20files`): encoded the same way here,
  // or the prefix never matched a request and nothing was served under it.
  if (!isUrl) base = new URL(base.replace(/[?#]/g, encodeURIComponent), 'http://site.invalid').pathname;
  return base === '/' ? '' : base;
}
