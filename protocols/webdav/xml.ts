/**
 * XML for WebDAV: request bodies are parsed with fast-xml-parser into a small namespace-resolved
 * tree (the parser itself knows nothing about namespaces); responses are plain strings built with
 * `esc`, never a DOM. Dead property values are kept as self-contained XML fragments (every element
 * re-declares its namespace), so they can be echoed inside any response.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { TextDecoder } from 'node:util';
import { DavError } from './errors.js';

export const DAV_NS = 'DAV:';

export interface XElem {
  ns: string;
  local: string;
  /** Attributes other than namespace declarations, by their raw name; values decoded. */
  attrs: Record<string, string>;
  /** Prefix → URI in scope at this element ('' is the default namespace). */
  scope: ReadonlyMap<string, string>;
  children: XNode[];
}
export type XNode = XElem | string;

// fast-xml-parser throws on element and attribute names like `constructor` or `__proto__` and renames
// `toString` and friends to `__toString`, though all are ordinary XML names (a property called
// `constructor` in some namespace is legal). Every name gets this mark, which no dangerous name
// starts with and no XML name can start with, and build() takes it off again. (The parser transforms
// a self-closing tag's name twice, so marking must be idempotent.)
const MARK = '~';
const mark = (name: string) => (name.startsWith(MARK) ? name : MARK + name);
const unmark = (name: string) => name.slice(MARK.length);

const parser = new XMLParser({
  preserveOrder: true,
  transformTagName: mark,
  transformAttributeName: mark,
  ignoreAttributes: false,
  attributeNamePrefix: '',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
  processEntities: false, // decoded below: only the XML built-ins and character references
  htmlEntities: false,
  ignoreDeclaration: true,
  ignorePiTags: true,
  cdataPropName: '#cdata',
});

// Null prototype: looked up by names from the request body (`&constructor;` is no entity).
const ENT: Record<string, string> = Object.assign(Object.create(null) as Record<string, string>, { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" });

// One character XML 1.0 cannot carry (see INVALID_SRC below; a lone code point is always lone).
// eslint-disable-next-line no-control-regex
const INVALID_CHAR = /^[\u0000-\u0008\u000b\u000c\u000e-\u001f\ud800-\udfff\ufffe\uffff]$/;

function decode(s: string): string {
  if (!s.includes('&')) return s;
  // Any entity name, not only lower-case ones: `&Auml;` or `&nbsp2;` (undeclared, so not well-formed)
  // passed through as text and came back as `&amp;Auml;`, another value than the one sent.
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[^\s&;#<>"']+);/g, (m, e: string) => {
    if (e[0] === '#') {
      const cp = e[1] === 'x' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
      // XML 1.0 §4.1 (WFC: Legal Character): `&#0;` or a surrogate is not well-formed, and esc()
      // answered it back as U+FFFD.
      if (!(cp >= 0 && cp <= 0x10ffff) || INVALID_CHAR.test(String.fromCodePoint(cp))) throw new DavError(400, 'bad character reference');
      return String.fromCodePoint(cp);
    }
    const v = ENT[e];
    if (v === undefined) throw new DavError(400, `unknown entity ${m}`);
    return v;
  });
}

type Raw = Record<string, unknown>;

function split(name: string): [string, string] {
  const i = name.indexOf(':');
  return i < 0 ? ['', name] : [name.slice(0, i), name.slice(i + 1)];
}

function build(raw: Raw, parentScope: ReadonlyMap<string, string>): XNode {
  if ('#text' in raw) return decode(String(raw['#text']));
  if ('#cdata' in raw) return ((raw['#cdata'] as Raw[]) ?? []).map((t) => String(t['#text'] ?? '')).join('');
  const key = Object.keys(raw).find((k) => k !== ':@');
  if (!key) throw new DavError(400, 'malformed XML');
  const name = unmark(key);
  const rawAttrs = (raw[':@'] as Record<string, string> | undefined) ?? {};
  let scope = parentScope;
  const attrs = Object.create(null) as Record<string, string>; // keyed by client attribute names
  for (const [mk, v] of Object.entries(rawAttrs)) {
    const k = unmark(mk);
    // XML 1.0 §3.3.3: a literal tab or line end in an attribute value reads as a space (a reference stays).
    const val = decode(String(v).replace(/\r\n?|[\t\n]/g, ' '));
    if (k === 'xmlns' || k.startsWith('xmlns:')) {
      if (scope === parentScope) scope = new Map(parentScope);
      const prefix = k === 'xmlns' ? '' : k.slice(6);
      // Namespaces in XML 1.0: a prefix may not be bound to the empty name (litmus propfind_invalid2).
      if (prefix !== '' && val === '') throw new DavError(400, 'invalid namespace declaration');
      (scope as Map<string, string>).set(prefix, val);
    } else attrs[k] = val;
  }
  const [prefix, local] = split(name);
  const ns = scope.get(prefix);
  if (ns === undefined) {
    if (prefix !== '') throw new DavError(400, `undeclared namespace prefix ${prefix}`);
  }
  // Namespaces in XML 1.0 §5: an attribute's prefix must be declared, and no two attributes may share
  // an expanded name. Kept, such a dead property came back as `xmlns:a0=""` (or a doubled attribute),
  // which no namespace-aware parser reads: every PROPFIND of the resource and its folder broke.
  const expanded = new Set<string>();
  for (const k of Object.keys(attrs)) {
    const [p, l] = split(k);
    const uri = p === '' ? '' : scope.get(p);
    if (uri === undefined) throw new DavError(400, `undeclared namespace prefix ${p}`);
    if (expanded.size === expanded.add(`${l} ${uri}`).size) throw new DavError(400, 'duplicate attribute');
  }
  const children = ((raw[key] as Raw[]) ?? []).map((c) => build(c, scope));
  return { ns: ns ?? '', local, attrs, scope, children };
}

/**
 * A request body's text in its encoding (XML 1.0 §4.3.3 and Appendix F): a UTF-16 byte-order mark,
 * else the declaration's encoding, else UTF-8. Read as UTF-8 whatever it said, a UTF-16 body (which
 * every XML processor must read) was a 400, and a value in ISO-8859-1, or in bytes that are no
 * UTF-8 at all, was stored with U+FFFD in place of its letters; bytes not of the encoding are a 400.
 */
export function xmlText(buf: Buffer): string {
  let label = 'utf-8';
  if (buf[0] === 0xff && buf[1] === 0xfe) label = 'utf-16le';
  else if (buf[0] === 0xfe && buf[1] === 0xff) label = 'utf-16be';
  else {
    const head = buf.subarray(0, 256).toString('latin1');
    const decl = /^(?:\xef\xbb\xbf)?<\?xml\s[^>]*?encoding\s*=\s*["']([A-Za-z][\w.-]*)["']/.exec(head);
    if (decl) label = decl[1]!;
  }
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(label, { fatal: true });
  } catch {
    throw new DavError(400, `unsupported encoding ${label}`);
  }
  try {
    return decoder.decode(buf); // a byte-order mark is dropped
  } catch {
    throw new DavError(400, `body is not ${label}`);
  }
}

/** Parse a request body; anything not well-formed (or with a DTD) is a 400. */
export function parseXml(text: string): XElem {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  if (/<!DOCTYPE/i.test(body)) throw new DavError(400, 'DTDs are not accepted');
  if (XMLValidator.validate(body) !== true) throw new DavError(400, 'malformed XML');
  let parsed: Raw[];
  try {
    parsed = parser.parse(body) as Raw[];
  } catch {
    throw new DavError(400, 'malformed XML'); // well-formed, but beyond the parser's limits (nesting depth)
  }
  const roots = parsed.map((r) => build(r, new Map([['xml', 'http://www.w3.org/XML/1998/namespace']])));
  const elems = roots.filter((r): r is XElem => typeof r !== 'string');
  if (elems.length !== 1 || roots.some((r) => typeof r === 'string' && r.trim() !== '')) throw new DavError(400, 'malformed XML');
  return elems[0]!;
}

export const isElem = (n: XNode): n is XElem => typeof n !== 'string';

export function elems(e: XElem, ns?: string, local?: string): XElem[] {
  return e.children.filter((c): c is XElem => isElem(c) && (ns === undefined || c.ns === ns) && (local === undefined || c.local === local));
}

export function child(e: XElem, ns: string, local: string): XElem | undefined {
  return elems(e, ns, local)[0];
}

export function textOf(e: XElem): string {
  return e.children.map((c) => (typeof c === 'string' ? c : textOf(c))).join('');
}

// A raw CR reaches a parser as LF (XML 1.0 §2.11 line-end normalisation): sent as a reference.
const SPECIAL = /[&<>"'\r]/;
const SPECIALS = /[&<>"'\r]/g;
const ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;', '\r': '&#13;' };
// Characters XML 1.0 cannot carry at all (C0 controls other than tab/LF/CR, lone surrogates, FFFE/FFFF).
// eslint-disable-next-line no-control-regex
const INVALID_SRC = '[\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\ufffe\\uffff]|[\\ud800-\\udbff](?![\\udc00-\\udfff])|(?<![\\ud800-\\udbff])[\\udc00-\\udfff]';
// A cheap first test without look-arounds; the exact pattern runs only when it hits.
const MAYBE_INVALID = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ud800-\udfff\ufffe\uffff]/;
const INVALID = new RegExp(INVALID_SRC, 'g');

/** Escape text or an attribute value for XML output. */
export function esc(s: string): string {
  const out = SPECIAL.test(s) ? s.replace(SPECIALS, (c) => ESC[c]!) : s;
  return MAYBE_INVALID.test(out) ? out.replace(INVALID, '\ufffd') : out;
}

/** Serialise an element's content so it stands alone: each element declares its own namespace. */
export function serializeContent(e: XElem): string {
  return e.children.map((c) => (typeof c === 'string' ? esc(c) : serializeElem(c))).join('');
}

// A tab or line feed written as is in an attribute value reads back as a space (§3.3.3): `a="x&#10;y"`
// came back as a plain line break, which the client read as `x y`.
const escAttr = (v: string) => esc(v).replace(/[\t\n]/g, (c) => (c === '\t' ? '&#9;' : '&#10;'));

function serializeElem(e: XElem): string {
  let attrs = ` xmlns="${esc(e.ns)}"`;
  let n = 0;
  for (const [k, v] of Object.entries(e.attrs)) {
    const [prefix, local] = split(k);
    if (prefix === '' || prefix === 'xml') attrs += ` ${k}="${escAttr(v)}"`;
    else {
      const p = `a${n++}`;
      attrs += ` xmlns:${p}="${esc(e.scope.get(prefix) ?? '')}" ${p}:${local}="${escAttr(v)}"`;
    }
  }
  const inner = serializeContent(e);
  return inner === '' ? `<${e.local}${attrs}/>` : `<${e.local}${attrs}>${inner}</${e.local}>`;
}

/** An element in its own (default) namespace, for dead properties (with their xml:lang) and unknown property names. */
export function nsElement(ns: string, local: string, inner = '', lang?: string): string {
  const attrs = ` xmlns="${esc(ns)}"` + (lang === undefined ? '' : ` xml:lang="${esc(lang)}"`);
  return inner === '' ? `<${local}${attrs}/>` : `<${local}${attrs}>${inner}</${local}>`;
}

export const XML_HEAD = '<?xml version="1.0" encoding="utf-8"?>\n';

/** A `<D:error>` body naming a precondition (RFC 4918 §16). */
export function errorBody(condition: string, detail = ''): string {
  const inner = detail ? `<D:${condition}>${detail}</D:${condition}>` : `<D:${condition}/>`;
  return `${XML_HEAD}<D:error xmlns:D="DAV:">${inner}</D:error>`;
}
