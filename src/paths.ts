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

/** Split any path-like string into validated segments. Throws INVALID for `..`, NUL or `\`. */
export function segments(p: string): string[] {
  if (p.includes('\0') || p.includes('\\')) throw invalid();
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
  return '/' + segments(p).join('/');
}

/** Validate a single name (a rename target, an entry of `names[]`). */
export function validateName(name: string): string {
  if (name === '' || name === '.' || name === '..' || /[/\\\0]/.test(name)) throw invalid();
  return name;
}

/** Already a VPath: absolute, and no empty, `.` or `..` segment, trailing slash, NUL or backslash. */
const CLEAN_VPATH = /^(?:\/|(?:\/(?!\.\.?(?:\/|$))[^/\\\0]+)+)$/;
/** A single segment that needs no cleaning. */
const PLAIN_NAME = /^(?!\.\.?$)[^/\\\0]+$/;

/** Join a VPath with a relative path (validated). `join('/a', 'b/c')` is `/a/b/c`. */
export function join(base: string, ...rest: string[]): string {
  // Fast path for the common "clean folder + one plain name" (once per entry of every listing).
  if (rest.length === 1 && PLAIN_NAME.test(rest[0]!) && CLEAN_VPATH.test(base)) return base === '/' ? '/' + rest[0] : base + '/' + rest[0];
  return '/' + [...segments(base), ...rest.flatMap(segments)].join('/');
}

export function parent(p: string): string {
  const s = segments(p);
  s.pop();
  return '/' + s.join('/');
}

export function basename(p: string): string {
  const s = segments(p);
  return s.length ? s[s.length - 1]! : '';
}

/** True when `child` equals `ancestor` or lies below it, compared segment by segment. */
export function isWithin(ancestor: string, child: string): boolean {
  const a = segments(ancestor);
  const c = segments(child);
  if (a.length > c.length) return false;
  return a.every((seg, i) => seg === c[i]);
}

/** The part of `p` below `ancestor` as a VPath (`/` when equal); undefined when `p` is not within it. */
export function relativeTo(ancestor: string, p: string): string | undefined {
  const a = segments(ancestor);
  const c = segments(p);
  if (a.length > c.length || !a.every((seg, i) => seg === c[i])) return undefined;
  return '/' + c.slice(a.length).join('/');
}

/** Percent-encode every segment (AList's url.PathEscape per segment) for URLs like raw_url and /d links. */
export function encodePathForUrl(p: string): string {
  return segments(p).map((s) => encodeURIComponent(s)).reduce((acc, s) => acc + '/' + s, '') || '/';
}
