/**
 * fs/regex_rename takes Go RE2 patterns and Go's replacement template (`$1`, `${1}`, `${name}`, `$$`).
 * We compile the pattern as a JS RegExp (RE2's syntax is almost a subset; `(?P<name>` and a leading
 * flag group are translated) and expand the template exactly as Go's Regexp.Expand does, including
 * `$1x` meaning the group named `1x` (empty when absent) and a malformed `$` staying literal.
 */

/** Compile a Go pattern; throws Error(`error parsing regexp: ...`) like Go's regexp.Compile. */
export function compileGoRegex(src: string): RegExp {
  let pattern = src.replace(/\(\?P</g, '(?<');
  let flags = 'g';
  const lead = /^\(\?([imsU]+)\)/.exec(pattern);
  if (lead) {
    if (lead[1]!.includes('U')) throw new Error(`error parsing regexp: ungreedy flag not supported: \`${src}\``);
    flags += lead[1]!.replace(/[^ims]/g, '');
    pattern = pattern.slice(lead[0].length);
  }
  try {
    return new RegExp(pattern, flags);
  } catch (e) {
    throw new Error(`error parsing regexp: ${(e as Error).message.replace(/^Invalid regular expression: /, '')}`);
  }
}

const NAME = /^[A-Za-z0-9_]+/;

/** Go's Regexp.Expand of `template` for one match (groups by index and by name). */
export function expandGo(template: string, groups: readonly (string | undefined)[], named: Record<string, string | undefined> | undefined): string {
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
      const close = t.indexOf('}');
      const inner = close < 0 ? '' : t.slice(1, close);
      if (close > 1 && NAME.exec(inner)?.[0] === inner) {
        name = inner;
        t = t.slice(close + 1);
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
    if (/^\d+$/.test(name)) out += groups[Number(name)] ?? '';
    else out += named?.[name] ?? '';
  }
  return out + t;
}

/** Go's ReplaceAllString(name, template) with a compiled global RegExp. */
export function replaceAllGo(re: RegExp, input: string, template: string): string {
  return input.replace(re, (...args: unknown[]) => {
    const last = args[args.length - 1];
    const hasNamed = typeof last === 'object' && last !== null;
    const named = hasNamed ? (last as Record<string, string | undefined>) : undefined;
    const groupEnd = args.length - (hasNamed ? 3 : 2);
    const groups = args.slice(0, groupEnd) as (string | undefined)[];
    return expandGo(template, groups, named);
  });
}
