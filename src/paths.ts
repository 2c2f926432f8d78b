/**
 * The only place where virtual paths are normalised, joined and compared.
 *
 * A virtual path (VPath) is absolute, uses `/`, has no empty, `.` or `..` segments and no trailing
 * slash (the root is `/`). Containment is decided on whole segments: `/a` contains `/a/b` but never `/ab`.
 * Anything that could escape (`..`, NUL, backslash) is refused rather than resolved, so no caller ever
 * has to wonder whether a path was "cleaned" into somewhere else.
 */
import { VfsError } from './errors.js';

export const RELATIVE_PATH_MESSAGE = 'access using relative path is not allowed';

function invalid(): VfsError {
  return new VfsError('INVALID', RELATIVE_PATH_MESSAGE);
}

/**
 * A UTF-16 surrogate without its pair (JSON can carry `"\ud800"`): no UTF-8 name can hold it, and
 * the file system would store U+FFFD instead, so two such names would meet in one file.
 */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** The exact pattern runs only for names with astral characters (emoji): the rest pay one cheap test. */
const hasLoneSurrogate = (s: string) => /[\ud800-\udfff]/.test(s) && LONE_SURROGATE.test(s);
const notUnicode = () => new VfsError('INVALID', 'file name is not valid Unicode');

/** Already a VPath: absolute, and no empty, `.` or `..` segment, trailing slash, NUL or backslash. */
const CLEAN_VPATH = /^(?:\/|(?:\/(?!\.\.?(?:\/|$))[^/\\\0]+)+)$/;
/** A single segment that needs no cleaning. */
const PLAIN_NAME = /^(?!\.\.?$)[^/\\\0]+$/;

// Most calls get a path that is already a VPath (one VFS call splits the same path a dozen times):
// for those the answer is found by slicing, without splitting, checking and re-joining segments.
const isClean = (p: string) => CLEAN_VPATH.test(p) && !hasLoneSurrogate(p);

/** Split any path-like string into validated segments. Throws INVALID for `..`, NUL or `\`. */
export function segments(p: string): string[] {
  if (isClean(p)) return p === '/' ? [] : p.slice(1).split('/');
  if (p.includes('\0') || p.includes('\\')) throw invalid();
  if (hasLoneSurrogate(p)) throw notUnicode();
  const out: string[] = [];
  for (const s of p.split('/')) {
    if (s === '' || s === '.') continue;
    if (s === '..') throw invalid();
    out.push(s);
  }
  return out;
}

/** Normalise a client-supplied path into a VPath (`''`, `.` and `/x/` all become absolute and clean). */
export function normalize(p: string): string {
  return isClean(p) ? p : '/' + segments(p).join('/');
}

/** Validate a single name (a rename target, an entry of `names[]`). */
export function validateName(name: string): string {
  if (name === '' || name === '.' || name === '..' || /[/\\\0]/.test(name)) throw invalid();
  if (hasLoneSurrogate(name)) throw notUnicode();
  return name;
}

/** Join a VPath with a relative path (validated). `join('/a', 'b/c')` is `/a/b/c`. */
export function join(base: string, ...rest: string[]): string {
  // Fast paths: a clean folder plus one plain name (once per entry of every listing), and a base
  // path plus a clean user path (once per request).
  if (rest.length === 1 && isClean(base)) {
    const r = rest[0]!;
    if (PLAIN_NAME.test(r)) return base === '/' ? '/' + r : base + '/' + r;
    if (isClean(r)) return base === '/' ? r : r === '/' ? base : base + r;
  }
  return '/' + [...segments(base), ...rest.flatMap(segments)].join('/');
}

/** True for the root (`/`, or anything that normalises to it). */
export function isRootPath(p: string): boolean {
  return p === '/' || segments(p).length === 0;
}

export function parent(p: string): string {
  if (isClean(p)) {
    const i = p.lastIndexOf('/');
    return i === 0 ? '/' : p.slice(0, i);
  }
  const s = segments(p);
  s.pop();
  return '/' + s.join('/');
}

export function basename(p: string): string {
  if (isClean(p)) return p.slice(p.lastIndexOf('/') + 1);
  const s = segments(p);
  return s.length ? s[s.length - 1]! : '';
}

/** True when `child` equals `ancestor` or lies below it, compared segment by segment. */
export function isWithin(ancestor: string, child: string): boolean {
  if (isClean(ancestor) && isClean(child)) return ancestor === '/' || child === ancestor || child.startsWith(ancestor + '/');
  const a = segments(ancestor);
  const c = segments(child);
  if (a.length > c.length) return false;
  return a.every((seg, i) => seg === c[i]);
}

/** The part of `p` below `ancestor` as a VPath (`/` when equal); undefined when `p` is not within it. */
export function relativeTo(ancestor: string, p: string): string | undefined {
  if (isClean(ancestor) && isClean(p)) {
    if (ancestor === '/') return p;
    if (p === ancestor) return '/';
    return p.startsWith(ancestor + '/') ? p.slice(ancestor.length) : undefined;
  }
  const a = segments(ancestor);
  const c = segments(p);
  if (a.length > c.length || !a.every((seg, i) => seg === c[i])) return undefined;
  return '/' + c.slice(a.length).join('/');
}

/** Percent-encode every segment (AList's url.PathEscape per segment) for URLs like raw_url and /d links. */
export function encodePathForUrl(p: string): string {
  return segments(p).map((s) => encodeURIComponent(s)).reduce((acc, s) => acc + '/' + s, '') || '/';
}

/**
 * A URL as a Location header value. Node refuses a header with characters past Latin-1 or line
 * breaks (a favicon or down_proxy_url with `图标` answered 500) and sends Latin-1 ones as single
 * bytes (`é` arrived garbled), so those, spaces and controls are percent-encoded as UTF-8, as a
 * browser sends such a URL (it decodes an encoded host again). Escapes already there are kept.
 */
export function locationOf(url: string): string {
  return url.replace(/[^\x21-\x7e]/gu, (c) => [...Buffer.from(c, 'utf8')].map((b) => '%' + b.toString(16).toUpperCase().padStart(2, '0')).join(''));
}
