/**
 * The `If` request header (RFC 4918 §10.4): parsing, and evaluation against the state of the
 * resources it names. The header is true when any one of its lists is true; a list is true when all
 * of its conditions are. A state token matches when it names a lock that covers the resource; an
 * entity tag matches the resource's current ETag. `DAV:no-lock` never matches anything.
 */
import { DavError } from './errors.js';

export interface IfCondition {
  not: boolean;
  token?: string;
  etag?: string;
}

export interface IfList {
  /** The tagged resource (a URL or absolute path) or undefined for the request URI. */
  resource?: string;
  conditions: IfCondition[];
}

/** What the evaluator needs to know about one resource. */
export interface ResourceState {
  /** Tokens of locks covering the resource. */
  tokens: ReadonlySet<string>;
  /** Current ETag (quoted), undefined when the resource does not exist. */
  etag?: string;
}

const bad = (why: string) => new DavError(400, `bad If header: ${why}`);

export function parseIf(header: string): IfList[] {
  const lists: IfList[] = [];
  let i = 0;
  let tag: string | undefined;
  let tagged: boolean | undefined;
  const ws = () => {
    while (i < header.length && /\s/.test(header[i]!)) i++;
  };
  const until = (close: string) => {
    const end = header.indexOf(close, i + 1);
    if (end < 0) throw bad(`missing ${close}`);
    const s = header.slice(i + 1, end);
    i = end + 1;
    return s;
  };
  for (ws(); i < header.length; ws()) {
    const c = header[i];
    if (c === '<') {
      if (tagged === false) throw bad('tagged and untagged lists mixed');
      tagged = true;
      tag = until('>');
      ws();
      if (header[i] !== '(') throw bad('resource tag without a list');
    } else if (c === '(') {
      if (tagged === undefined) tagged = false;
      i++;
      const conditions: IfCondition[] = [];
      for (ws(); header[i] !== ')'; ws()) {
        if (i >= header.length) throw bad('unclosed list');
        let not = false;
        if (header.slice(i, i + 3).toLowerCase() === 'not') {
          not = true;
          i += 3;
          ws();
        }
        if (header[i] === '<') conditions.push({ not, token: until('>') });
        else if (header[i] === '[') conditions.push({ not, etag: until(']') });
        else throw bad('expected a state token or an entity tag');
      }
      i++;
      if (conditions.length === 0) throw bad('empty list');
      lists.push({ resource: tagged ? tag : undefined, conditions });
    } else throw bad(`unexpected ${c}`);
  }
  if (lists.length === 0) throw bad('no lists');
  return lists;
}

const weakless = (e: string) => (e.startsWith('W/') ? e.slice(2) : e);

/** True when the header holds for the resources' current state. */
export async function evaluateIf(lists: IfList[], stateOf: (resource: string | undefined) => Promise<ResourceState>): Promise<boolean> {
  const cache = new Map<string | undefined, Promise<ResourceState>>();
  const state = (r: string | undefined) => {
    let p = cache.get(r);
    if (!p) cache.set(r, (p = stateOf(r)));
    return p;
  };
  for (const list of lists) {
    const s = await state(list.resource);
    const ok = list.conditions.every((c) => {
      const match = c.token !== undefined ? s.tokens.has(c.token) : s.etag !== undefined && weakless(s.etag) === weakless(c.etag ?? '');
      return match !== c.not;
    });
    if (ok) return true;
  }
  return false;
}

/** Lock tokens the client submitted: every state token named positively in the header. */
export function submittedTokens(lists: IfList[]): Set<string> {
  const out = new Set<string>();
  for (const l of lists) for (const c of l.conditions) if (c.token !== undefined && !c.not) out.add(c.token);
  return out;
}
