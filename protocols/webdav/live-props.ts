/**
 * Live properties (RFC 4918 §15, RFC 4331 quota) rendered from a VFS Entry, plus the lock
 * discovery XML shared by PROPFIND and LOCK.
 */
import { relativeTo } from '../../src/paths.js';
import type { Entry } from '../../src/vfs/types.js';
import type { DeadProp } from './dead-props.js';
import type { LockInfo } from './locks.js';
import { contentTypeOf, etagOf, httpDate } from './resource.js';
import { hrefOf } from './request.js';
import { esc } from './xml.js';

export interface Quota {
  available?: number;
  used?: number;
}

/** What a live property renderer may look at besides the entry. */
export interface LiveCtx {
  /** Locks covering the entry (only computed when lockdiscovery is wanted). */
  locks(entry: Entry): LockInfo[];
  /** Space figures of the storage serving the entry (only fetched when a quota property is wanted). */
  quota?: (entry: Entry) => Quota | undefined;
  basePath: string;
  siteBase: string;
}

const SUPPORTED_LOCK =
  '<D:supportedlock>' +
  '<D:lockentry><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>' +
  '<D:lockentry><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>' +
  '</D:supportedlock>';

export function activeLock(l: LockInfo, basePath: string, siteBase: string, now = Date.now()): string {
  const root = relativeTo(basePath, l.root);
  return (
    `<D:activelock><D:locktype><D:write/></D:locktype><D:lockscope><D:${l.scope}/></D:lockscope>` +
    `<D:depth>${l.depth === '0' ? '0' : 'infinity'}</D:depth>` +
    (l.owner ? `<D:owner>${l.owner}</D:owner>` : '') +
    `<D:timeout>Second-${Math.max(0, Math.ceil((l.expires - now) / 1000))}</D:timeout>` +
    `<D:locktoken><D:href>${esc(l.token)}</D:href></D:locktoken>` +
    (root !== undefined ? `<D:lockroot><D:href>${esc(hrefOf(root, false, siteBase))}</D:href></D:lockroot>` : '') +
    `</D:activelock>`
  );
}

export function lockDiscovery(locks: LockInfo[], basePath: string, siteBase: string): string {
  if (!locks.length) return '<D:lockdiscovery/>';
  const now = Date.now();
  return `<D:lockdiscovery>${locks.map((l) => activeLock(l, basePath, siteBase, now)).join('')}</D:lockdiscovery>`;
}

type Render = (e: Entry, c: LiveCtx) => string | undefined;

// Listings repeat timestamps a lot (files written together): remember the last few renderings.
function memoDate(fmt: (d: Date) => string): (d: Date) => string {
  const memo = new Map<number, string>();
  return (d) => {
    const t = d.getTime();
    let s = memo.get(t);
    if (s === undefined) {
      if (memo.size > 1024) memo.clear();
      memo.set(t, (s = fmt(d)));
    }
    return s;
  };
}
// RFC 3339 without the fraction: Windows' WebDAV redirector (Microsoft-WebDAV-MiniRedir, Windows 7 to
// 11) cannot parse a creationdate with fractional seconds, though RFC 3339 allows them.
const isoDate = memoDate((d) => d.toISOString().replace(/\.\d+Z$/, 'Z'));
const rfc1123 = memoDate(httpDate);

/**
 * Every live property in the DAV: namespace; undefined from a renderer means "not defined here".
 * Null prototype: it is looked up by client-sent names (`constructor`, `__proto__` are not properties).
 */
export const LIVE: Record<string, Render> = Object.assign(Object.create(null) as Record<string, Render>, {
  creationdate: (e) => `<D:creationdate>${isoDate(e.created ?? e.modified)}</D:creationdate>`,
  displayname: (e) => `<D:displayname>${esc(e.name)}</D:displayname>`,
  getcontentlength: (e) => (e.isDir ? undefined : `<D:getcontentlength>${e.size}</D:getcontentlength>`),
  getcontenttype: (e) => (e.isDir ? undefined : `<D:getcontenttype>${esc(contentTypeOf(e.name))}</D:getcontenttype>`),
  getetag: (e) => `<D:getetag>${esc(etagOf(e))}</D:getetag>`,
  getlastmodified: (e) => `<D:getlastmodified>${rfc1123(e.modified)}</D:getlastmodified>`,
  resourcetype: (e) => (e.isDir ? '<D:resourcetype><D:collection/></D:resourcetype>' : '<D:resourcetype/>'),
  supportedlock: () => SUPPORTED_LOCK,
  lockdiscovery: (e, c) => lockDiscovery(c.locks(e), c.basePath, c.siteBase),
  'quota-available-bytes': (e, c) => {
    const n = c.quota?.(e)?.available;
    return n !== undefined ? `<D:quota-available-bytes>${n}</D:quota-available-bytes>` : undefined;
  },
  'quota-used-bytes': (e, c) => {
    const n = c.quota?.(e)?.used;
    return n !== undefined ? `<D:quota-used-bytes>${n}</D:quota-used-bytes>` : undefined;
  },
} satisfies Record<string, Render>);

/** allprop's live properties in one pass (the hot path of big listings); same output as ALLPROP. */
export function allLive(e: Entry, c: LiveCtx, displayname = `<D:displayname>${esc(e.name)}</D:displayname>`): string {
  const created = `<D:creationdate>${isoDate(e.created ?? e.modified)}</D:creationdate>${displayname}`;
  const file = e.isDir
    ? ''
    : `<D:getcontentlength>${e.size}</D:getcontentlength><D:getcontenttype>${contentTypeOf(e.name)}</D:getcontenttype>`;
  return (
    created +
    file +
    `<D:getetag>${etagOf(e)}</D:getetag><D:getlastmodified>${rfc1123(e.modified)}</D:getlastmodified>` +
    (e.isDir ? '<D:resourcetype><D:collection/></D:resourcetype>' : '<D:resourcetype/>') +
    SUPPORTED_LOCK +
    lockDiscovery(c.locks(e), c.basePath, c.siteBase)
  );
}

/** Live properties that allprop returns (RFC 4331: quota only on request). */
export const ALLPROP = Object.keys(LIVE).filter((k) => !k.startsWith('quota-'));

/**
 * DAV: properties a client may set, kept as dead properties that PROPFIND answers in place of the
 * live value while set. RFC 4918 §15.2 lets displayname be writable, and Apache mod_dav stores it as
 * a dead property (std_liveprop.c): clients that rename a resource's shown name got 403 here.
 */
export const WRITABLE_LIVE: ReadonlySet<string> = new Set(['displayname']);

/** Live properties a client may not set or remove. */
export const isLive = (ns: string, local: string) => ns === 'DAV:' && local in LIVE && !WRITABLE_LIVE.has(local);

/** Microsoft's namespace for the Win32* properties Windows' redirector sets with PROPPATCH. */
export const MS_NS = 'urn:schemas-microsoft-com:';

/**
 * A dead property's value as PROPFIND answers it. Win32LastModifiedTime on a file is answered as
 * the file's current mtime (PROPPATCH stores the date into the file's mtime through the VFS, when
 * the storage can): Windows reads it in preference to getlastmodified, so the stored copy would
 * keep showing the old date after the file is rewritten by any protocol (and the redirector could
 * keep serving its stale cached copy).
 */
export function deadValue(d: DeadProp, e: Entry): string {
  return !e.isDir && d.local === 'Win32LastModifiedTime' && d.ns === MS_NS ? rfc1123(e.modified) : d.xml;
}
