/**
 * Meta rules (alist-compat §9, §13) evaluated in the core. The rule for a path is the *nearest* one:
 * an exact match of the path, else of its parent, and so on up to `/`; only that rule applies. Each
 * facet covers the rule's own path, and its descendants only when the facet's `*_sub` flag is set
 * (password ↔ p_sub, write ↔ w_sub, readme ↔ r_sub, header ↔ header_sub; hide ↔ h_sub applies to the
 * children *listed in* a folder).
 *
 * All rules are loaded once into a path-keyed map with their hide regexes compiled; any meta write
 * (MetaService) or external store change must call `invalidate()`.
 *
 * Safer than AList (decision 3): a path is hidden when *any* of its components is hidden in its
 * parent folder, so a file inside a hidden folder cannot be reached by its direct path either.
 */
import { RE2JS } from 're2js';
import { safeEqual } from '../auth/passwords.js';
import { can, type Principal } from '../auth/principal.js';
import { VfsError } from '../errors.js';
import { isWithin, join, segments } from '../paths.js';
import type { Repo } from '../store/store.js';
import type { MetaRecord } from '../store/types.js';
import type { DirFacts } from './types.js';

/** A compiled hide line: does it match (anywhere in) a name. */
export interface HideMatcher {
  test(name: string): boolean;
}

interface Rule {
  meta: MetaRecord;
  hide: HideMatcher[];
}

/**
 * One hide line as a RegExp. AList compiles hide lines with regexp2 (.NET syntax), where a pattern
 * may start with inline options such as `(?i)`; JavaScript has no inline options, so a leading group
 * of i, m, s (and n, x, which have no JS form and are refused) becomes the RegExp's flags.
 */
function hideRegex(line: string): HideMatcher {
  const src = line.endsWith('\r') ? line.slice(0, -1) : line;
  const lead = /^\(\?([a-zA-Z]+)\)/.exec(src);
  // Built only when RE2 refuses the line: built first, a line only RE2 knows, such as the scoped
  // flags of `(?i:secret)` (AList's regexp2 takes them; Node 20's RegExp does not), was refused.
  const js = () => {
    refuseMisreadEscapes(src);
    return !lead || !/^[ims]+$/.test(lead[1]!) ? new RegExp(src) : new RegExp(src.slice(lead[0].length), [...new Set(lead[1]!)].join(''));
  };
  // Matched with RE2 (linear time) whenever RE2 takes the pattern, leading (?ims) included: a
  // backtracking RegExp such as `^(a+)+$` froze the whole server for minutes on one 40-character
  // name, in every listing of the folder. Only what RE2 lacks (look-around, backreferences) stays
  // on the JavaScript engine.
  try {
    return RE2JS.compile(unicodeClasses(src));
  } catch {
    return js();
  }
}

/** regexp2's `\w` (.NET: Unicode letters, marks, digits and connectors); RE2's is ASCII. */
const WORD = '\\p{L}\\p{Mn}\\p{Nd}\\p{Pc}';

/**
 * A line for RE2 with `\w`, `\W`, `\d`, `\D` as regexp2 reads them, Unicode (not ASCII): `^\w+\.bak$`
 * left `备份.bak` shown, which AList hides. `\W` inside a bracket has no RE2 form and stays as is.
 */
function unicodeClasses(src: string): string {
  let out = '';
  let inClass = false;
  for (let i = 0; i < src.length; i++) {
    const c = src[i]!;
    if (c === '\\' && i + 1 < src.length) {
      const n = src[++i]!;
      if (n === 'd' || n === 'D') out += `\\${n === 'd' ? 'p' : 'P'}{Nd}`;
      else if (n === 'w') out += inClass ? WORD : `[${WORD}]`;
      else if (n === 'W' && !inClass) out += `[^${WORD}]`;
      else out += c + n;
      continue;
    }
    if (c === '[' && !inClass) {
      inClass = true;
      const skip = /^\^?\]?/.exec(src.slice(i + 1))![0]; // a leading `^`, and a `]` right after it, are no class end
      out += c + skip;
      i += skip.length;
      continue;
    }
    if (c === ']') inClass = false;
    out += c;
  }
  return out;
}

/** The letters JavaScript knows after a backslash (outside `u` mode); see refuseMisreadEscapes. */
const JS_LETTER_ESCAPES = new Set('dDwWsSbBfnrtvcxuk');

/**
 * JavaScript (without the `u` flag, which would refuse regexp2's harmless `\-` or `\_`) reads an
 * escaped letter it does not know as the bare letter: regexp2's `\.bak\Z` (end of the name) saved
 * as "`.bak` followed by Z" and hid nothing. Such a line is refused, as lines with no JS form are.
 */
function refuseMisreadEscapes(src: string): void {
  for (const [, c] of src.matchAll(/\\([\s\S])/g)) {
    if (/[A-Za-z]/.test(c!) && !JS_LETTER_ESCAPES.has(c!)) throw new SyntaxError(`\\${c} has no JavaScript form`);
  }
}

/** Hide text → one regex per line (a trailing CR is ignored; an empty line matches everything). */
export function compileHide(text: string): HideMatcher[] {
  if (text === '') return [];
  return text.split('\n').map(hideRegex);
}

/** Check hide text at save time: VfsError('INVALID', `<line> is illegal: <err>`) for the first bad line. */
export function validateHide(text: string): void {
  for (const line of text === '' ? [] : text.split('\n')) {
    try {
      hideRegex(line);
    } catch (e) {
      throw new VfsError('INVALID', `${line} is illegal: ${(e as Error).message}`);
    }
  }
}

/** What a stored rule's missing fields mean (the values MetaService saves by default). */
export const RECORD_DEFAULTS: Omit<MetaRecord, 'id' | 'path'> = {
  password: '', p_sub: false, write: false, w_sub: false, hide: '', h_sub: false, readme: '', r_sub: false, header: '', header_sub: false,
};

/** Does a facet of `meta` reach `path` (its own path always, descendants only with the sub flag). */
const applies = (meta: MetaRecord, path: string, sub: boolean) => meta.path === path || sub;

/** See MetaRules.accessChecker. */
export interface AccessChecker {
  readonly guarded: readonly string[];
  canAccess(vpath: string): boolean;
}

type RuleMap = ReadonlyMap<string, Rule>;

/**
 * The nearest rule at or above `vpath`. Each level's key is cut from the cleaned path (one slice),
 * not re-joined from its segments: a join per level made one lookup quadratic in the depth.
 */
function nearestIn(rules: RuleMap, vpath: string): Rule | undefined {
  let dir = '/' + segments(vpath).join('/');
  for (;;) {
    const r = rules.get(dir);
    if (r || dir === '/') return r;
    const cut = dir.lastIndexOf('/');
    dir = cut === 0 ? '/' : dir.slice(0, cut);
  }
}

function hidePatternsIn(rules: RuleMap, p: Principal, dirVpath: string): HideMatcher[] {
  if (can.seeHidden(p)) return [];
  const r = nearestIn(rules, dirVpath);
  const dir = '/' + segments(dirVpath).join('/');
  return r && applies(r.meta, dir, r.meta.h_sub) ? r.hide : [];
}

/**
 * Hidden: some component below the principal's base path matches its parent folder's hide rule.
 * The folders down to the base path itself are never tested: they are the user's root, not
 * something the user browses into (a hidden `/users` must not lock out a user based at
 * `/users/alice`, as AList, which tests only the requested name, would not).
 */
function hiddenIn(rules: RuleMap, p: Principal, vpath: string): boolean {
  if (can.seeHidden(p)) return false;
  const segs = segments(vpath);
  const base = isWithin(p.basePath, vpath) ? segments(p.basePath).length : 0;
  // One walk down, carrying each folder's nearest rule (its own, else its parent's nearest):
  // asking nearestIn afresh for every component made this cubic in the depth (200 levels: ~65 ms
  // a check, and an fs/get makes two). Same answers as hidePatternsIn(rules, p, folder) per component.
  let dir = '/';
  let nearest = rules.get(dir);
  for (let i = 0; i < segs.length; i++) {
    if (i > 0) {
      dir = i === 1 ? '/' + segs[0]! : dir + '/' + segs[i - 1]!;
      nearest = rules.get(dir) ?? nearest;
    }
    if (i < base || !nearest || !applies(nearest.meta, dir, nearest.meta.h_sub)) continue;
    if (nearest.hide.some((re) => re.test(segs[i]!))) return true;
  }
  return false;
}

function passwordOkIn(rules: RuleMap, p: Principal, vpath: string, password: string | undefined): boolean {
  if (can.skipPassword(p)) return true;
  const r = nearestIn(rules, vpath);
  if (!r || r.meta.password === '') return true;
  if (!applies(r.meta, '/' + segments(vpath).join('/'), r.meta.p_sub)) return true;
  return safeEqual(password ?? '', r.meta.password);
}

export class MetaRules {
  private rules: Promise<Map<string, Rule>> | undefined;

  constructor(private readonly repo: Repo<MetaRecord>) {}

  /** Drop the cached rules; the next lookup reloads them from the store. */
  invalidate(): void {
    this.rules = undefined;
  }

  private load(): Promise<Map<string, Rule>> {
    if (this.rules) return this.rules;
    const p = (this.rules = this.repo.list().then((all) => {
      const m = new Map<string, Rule>();
      for (const stored of all) {
        // A hand-edited store (accepted when it has an id and a path) may leave fields out or write
        // the path unclean (`/vault/`): missing texts are empty and flags off, as MetaService saves
        // them, and the path is the cleaned key, which `applies` compares against. Else a rule's
        // own folder was left open, a missing hide text hid every entry, and a missing password
        // made the password check throw.
        const path = '/' + segments(stored.path).join('/');
        const meta: MetaRecord = { ...RECORD_DEFAULTS, ...stored, path };
        for (const k of ['password', 'hide', 'readme', 'header'] as const) if (typeof meta[k] !== 'string') meta[k] = '';
        for (const k of ['p_sub', 'write', 'w_sub', 'h_sub', 'r_sub', 'header_sub'] as const) meta[k] = meta[k] === true; // "false" is no grant
        let hide: HideMatcher[] = [];
        try {
          hide = compileHide(meta.hide);
        } catch {
          hide = [/(?:)/]; // a stored rule with a broken regex hides everything rather than nothing
        }
        m.set(path, { meta, hide });
      }
      return m;
    }));
    p.catch(() => { if (this.rules === p) this.rules = undefined; }); // a failed load is retried
    return p;
  }

  private async nearestRule(vpath: string): Promise<Rule | undefined> {
    return nearestIn(await this.load(), vpath);
  }

  /** The nearest rule at or above `vpath` (absolute virtual path), if any. */
  async nearest(vpath: string): Promise<MetaRecord | undefined> {
    return (await this.nearestRule(vpath))?.meta;
  }

  /** Regexes hiding children of the folder `dirVpath` from this principal ([] with the see-hidden bit). */
  async hidePatterns(p: Principal, dirVpath: string): Promise<HideMatcher[]> {
    return hidePatternsIn(await this.load(), p, dirVpath);
  }

  /** Is `vpath` hidden from this principal: some component matches its parent folder's hide rule. */
  async isHidden(p: Principal, vpath: string): Promise<boolean> {
    return hiddenIn(await this.load(), p, vpath);
  }

  /** AList's password part of CanAccess: bit1 bypasses; else the nearest rule's password, if it applies. */
  async passwordOk(p: Principal, vpath: string, password: string | undefined): Promise<boolean> {
    return passwordOkIn(await this.load(), p, vpath, password);
  }

  /**
   * canAccess for one principal and password as a synchronous function over the rules as they are
   * now, for callers that test many paths in a tight loop (search results). `guarded` lists the
   * rule paths that can deny this principal anything; a path outside all their subtrees (the rule
   * path itself included) is always accessible, so callers may test only paths inside them.
   */
  async accessChecker(p: Principal, password: string | undefined): Promise<AccessChecker> {
    const rules = await this.load();
    const guarded: string[] = [];
    for (const [path, r] of rules) {
      if ((r.hide.length && !can.seeHidden(p)) || (r.meta.password !== '' && !can.skipPassword(p))) guarded.push(path);
    }
    return { guarded, canAccess: (vpath) => !hiddenIn(rules, p, vpath) && passwordOkIn(rules, p, vpath, password) };
  }

  /**
   * Moving or copying the folder `from` to `to` carries its whole subtree along, while rules stay at
   * their paths: an entry below `from` that `p` may not reach (hidden, or behind a path password)
   * could land where `p` may, and a rename of its folder would be enough to show it. Returns
   * undefined when that cannot happen, so that most moves walk nothing: no rule that denies `p`
   * anything decides a path below `from` (only the nearest rule at or above a folder decides its
   * entries), or the same rule decides every path below both folders and no rule lies at or below
   * either. Else a test for a path relative to the folder (`/a/b`): denied below `from`, allowed
   * below `to`.
   */
  async exposure(p: Principal, password: string | undefined, from: string, to: string): Promise<((rel: string) => boolean) | undefined> {
    const rules = await this.load();
    const denies = (r: Rule | undefined) => !!r && ((r.hide.length > 0 && !can.seeHidden(p)) || (r.meta.password !== '' && !can.skipPassword(p)));
    const deniedBelowFrom = denies(nearestIn(rules, from)) || [...rules].some(([k, r]) => isWithin(from, k) && denies(r));
    if (!deniedBelowFrom) return undefined;
    const inside = [...rules.keys()].some((k) => isWithin(from, k) || isWithin(to, k));
    if (!inside && nearestIn(rules, from) === nearestIn(rules, to)) return undefined;
    const ok = (v: string) => !hiddenIn(rules, p, v) && passwordOkIn(rules, p, v, password);
    return (rel) => !ok(join(from, rel)) && ok(join(to, rel));
  }

  /** AList's CanAccess (hide, then password), made stricter on hide as described above. */
  async canAccess(p: Principal, vpath: string, password: string | undefined): Promise<boolean> {
    return !(await this.isHidden(p, vpath)) && (await this.passwordOk(p, vpath, password));
  }

  /** Throwing form of canAccess: hidden → NOT_FOUND, password missing or wrong → PASSWORD_REQUIRED. */
  async assertAccess(p: Principal, vpath: string, password: string | undefined): Promise<void> {
    // The rules are awaited once for both checks (every VFS call makes this one: a promise chain per
    // check was a visible part of a small PUT's CPU).
    const rules = await this.load();
    if (hiddenIn(rules, p, vpath)) throw new VfsError('NOT_FOUND', undefined, { path: vpath });
    if (!passwordOkIn(rules, p, vpath, password)) throw new VfsError('PASSWORD_REQUIRED', undefined, { path: vpath });
  }

  /** May `p` create or upload inside the folder `dirVpath`: write bit, or a meta write that reaches it. */
  async canWrite(p: Principal, dirVpath: string): Promise<boolean> {
    if (can.write(p)) return true;
    const r = await this.nearestRule(dirVpath);
    return !!r && r.meta.write && applies(r.meta, '/' + segments(dirVpath).join('/'), r.meta.w_sub);
  }

  /** fs/list's readme, header, write and whether a path password protects the folder. */
  async facts(p: Principal, dirVpath: string): Promise<DirFacts> {
    const r = await this.nearestRule(dirVpath);
    const dir = '/' + segments(dirVpath).join('/');
    const m = r?.meta;
    return {
      readme: m && applies(m, dir, m.r_sub) ? m.readme : '',
      header: m && applies(m, dir, m.header_sub) ? m.header : '',
      write: await this.canWrite(p, dirVpath),
      passwordProtected: !!m && m.password !== '' && applies(m, dir, m.p_sub),
    };
  }
}
