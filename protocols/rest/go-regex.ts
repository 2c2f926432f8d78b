/**
 * fs/regex_rename takes Go RE2 patterns and Go's replacement template (`$1`, `${1}`, `${name}`, `$$`).
 * Patterns compile with re2js (a port of RE2): linear-time matching whatever the pattern and the name
 * (a backtracking JS RegExp let `^(a+)+$` freeze the event loop), and exactly Go's syntax: `(?P<name>`,
 * `(?<name>`, `(?imsU)` flags, `\pL`, `[[:alpha:]]`, `\z`; look-around and backreferences are refused with
 * Go's `error parsing regexp: ...`. The replacement loop and the template expansion follow Go's
 * Regexp.ReplaceAllString and Regexp.Expand: an empty match abutting the previous match is ignored,
 * `$1x` is the group named `1x` (empty when absent) and a malformed `$` stays literal.
 */
import { RE2JS } from 're2js';

/** A compiled Go pattern: what fs/regex_rename needs of it, running on RE2. */
export class GoRegex {
  private constructor(
    /** The Go pattern as given. */
    readonly source: string,
    private readonly re2: RE2JS,
  ) {}

  /** Compile a Go pattern; throws Error(`error parsing regexp: ...`) like Go's regexp.Compile. */
  static compile(src: string): GoRegex {
    try {
      return new GoRegex(src, RE2JS.compile(src));
    } catch (e) {
      const msg = (e as Error).message;
      throw new Error(msg.startsWith('error parsing regexp: ') ? msg : `error parsing regexp: ${msg}`);
    }
  }

  /** Does the pattern match anywhere in `input` (Go's MatchString)? */
  test(input: string): boolean {
    return this.re2.matcher(input).find();
  }

  /**
   * Go's ReplaceAllString(input, template): successive leftmost-first matches, each replaced by the
   * expanded template, except an empty match that abuts the previous match (so `(.*)` on `a.txt` is
   * replaced once, and `a*` on `baaac` gives `-b-c-` for `-`).
   */
  replaceAll(input: string, template: string): string {
    const m = this.re2.matcher(input);
    const end = input.length;
    const groups: (string | null)[] = [];
    let out = '';
    let lastMatchEnd = 0;
    let searchPos = 0;
    while (searchPos <= end && m.find(searchPos)) {
      const a0 = m.start();
      const a1 = m.end();
      out += input.slice(lastMatchEnd, a0);
      if (a1 > lastMatchEnd || a0 === 0) {
        groups.length = 0;
        for (let g = 0; g <= m.groupCount(); g++) groups.push(m.group(g));
        out += expandGo(template, groups, m.getNamedGroups());
      }
      lastMatchEnd = a1;
      // Advance past this match; always advance at least one character (a whole code point).
      const w = searchPos < end ? width(input, searchPos) : 1;
      searchPos = searchPos + w > a1 ? searchPos + w : a1;
    }
    return out + input.slice(lastMatchEnd);
  }
}

/** A template name: Go's extract takes Unicode letters, digits (Nd) and `_`. */
const NAME = /^[\p{L}\p{Nd}_]+/u;

/** Go's extract: a group number only for ASCII digits, below 1e8-ish, without a leading zero. */
function groupNumber(name: string): number {
  let num = 0;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c < 48 || c > 57 || num >= 1e8) return -1;
    num = num * 10 + (c - 48);
  }
  return name[0] === '0' && name.length > 1 ? -1 : num;
}

/** Go's Regexp.Expand of `template` for one match (groups by index and by name). */
export function expandGo(template: string, groups: readonly (string | null | undefined)[], named: Record<string, string | null | undefined> | undefined): string {
  let out = '';
  let t = template;
  for (;;) {
    const i = t.indexOf('$');
    if (i < 0) break;
    out += t.slice(0, i);
    t = t.slice(i + 1);
    if (t.startsWith('$')) {
      out += '$';
      t = t.slice(1);
      continue;
    }
    let name: string | undefined;
    if (t.startsWith('{')) {
      const m = NAME.exec(t.slice(1));
      if (m && t[1 + m[0].length] === '}') {
        name = m[0];
        t = t.slice(name.length + 2);
      }
    } else {
      const m = NAME.exec(t);
      if (m) {
        name = m[0];
        t = t.slice(name.length);
      }
    }
    if (name === undefined) {
      out += '$'; // malformed: the `$` is literal text
      continue;
    }
    const num = groupNumber(name);
    if (num >= 0) out += groups[num] ?? '';
    else out += (named && Object.hasOwn(named, name) ? named[name] : undefined) ?? '';
  }
  return out + t;
}

/** UTF-16 length of the code point at `i` (1 at a lone surrogate), like Go's DecodeRuneInString width. */
function width(s: string, i: number): number {
  const c = s.codePointAt(i);
  return c !== undefined && c > 0xffff ? 2 : 1;
}
