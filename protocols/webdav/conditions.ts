/**
 * Preconditions every write goes through: the `If` header must hold (else 412), and every lock that
 * covers a resource the write changes must have its token submitted by the lock's owner (else 423;
 * 403 when another user submitted it).
 */
import { isVfsError, VfsError } from '../../src/errors.js';
import { isWithin, relativeTo } from '../../src/paths.js';
import type { Entry } from '../../src/vfs/types.js';
import { DavError } from './errors.js';
import { evaluateIf, parseIf, submittedTokens, type IfList, type ResourceState } from './if-header.js';
import { etagOf } from './resource.js';
import { utf8Header } from '../header-text.js';
import { knownModTime, parseHttpDate } from '../http-date.js';
import { hrefOf, parentOf, userPathOf, vpathOf, type Dav } from './request.js';
import { esc } from './xml.js';
import { storedPath } from './unicode-names.js';
import type { LockInfo } from './locks.js';

export interface WriteTarget {
  /** User path changed by the write. */
  path: string;
  /** The write also changes everything below (DELETE, MOVE source, overwritten destination). */
  deep?: boolean;
}

const etagList = (h: string) => h.split(',').map((s) => s.trim());
const weakless = (t: string) => (t.startsWith('W/') ? t.slice(2) : t);
const seconds = (d: Date) => Math.floor(d.getTime() / 1000);

/**
 * RFC 9110 §13.2.2 preconditions on the request's own resource (`e`; undefined when it does not
 * exist): 412, 304 (GET/HEAD only) or undefined to go on. If-Match compares strongly, If-None-Match
 * weakly; a write answers 412 where GET answers 304, and ignores If-Modified-Since.
 */
export function conditional(dav: Pick<Dav, 'req' | 'method'>, e: Entry | undefined): number | undefined {
  const h = dav.req.headers;
  const read = dav.method === 'GET' || dav.method === 'HEAD';
  const etag = e && etagOf(e);
  const ifMatch = h['if-match'];
  if (ifMatch && (!etag || (ifMatch.trim() !== '*' && !etagList(ifMatch).includes(etag)))) return 412;
  // A value that is not an HTTP-date is ignored (RFC 9110 §13.1.4), not read by Date.parse's rules.
  const ius = parseHttpDate(h['if-unmodified-since']);
  if (!ifMatch && e && ius !== undefined && knownModTime(e.modified) && seconds(e.modified) > ius / 1000) return 412;
  const inm = h['if-none-match'];
  if (inm) return etag && (inm.trim() === '*' || etagList(inm).map(weakless).includes(etag)) ? (read ? 304 : 412) : undefined;
  const ims = parseHttpDate(h['if-modified-since']);
  if (read && e && ims !== undefined && knownModTime(e.modified) && seconds(e.modified) <= ims / 1000) return 304;
  return undefined;
}

/** True when the request carries an RFC 9110 precondition a write must evaluate. */
export function hasPreconditions(dav: Pick<Dav, 'req'>): boolean {
  const h = dav.req.headers;
  return !!(h['if-match'] || h['if-none-match'] || h['if-unmodified-since']);
}

/** A write's RFC 9110 preconditions on its own resource (undefined when missing): 412 when false. */
export function checkPreconditions(dav: Dav, e: Entry | undefined): void {
  if (conditional(dav, e) !== undefined) throw new DavError(412, 'precondition failed');
}

/** The parsed `If` header, or undefined when there is none. */
export function ifLists(dav: Dav): IfList[] | undefined {
  const h = dav.req.headers['if'];
  return typeof h === 'string' && h.trim() !== '' ? parseIf(utf8Header(h)) : undefined; // tagged URLs may be raw UTF-8
}

/** Current lock tokens and ETag of the resource an If list names. */
export async function resourceState(dav: Dav, resource: string | undefined): Promise<ResourceState> {
  const sent = resource === undefined ? dav.path : userPathOf(resource, dav.deps.siteBase);
  if (sent === undefined) return { tokens: new Set() };
  const path = resource === undefined ? sent : await storedPath(dav.deps.vfs, dav.ctx, sent); // tagged URLs from Finder: NFD
  const tokens = new Set(dav.locks.covering(vpathOf(dav, path)).map((l) => l.token));
  try {
    const e = await dav.deps.vfs.stat(dav.ctx, path);
    return { tokens, etag: etagOf(e) };
  } catch (e) {
    if (isVfsError(e)) return { tokens };
    throw e;
  }
}

/** Evaluate the If header (412 when false) and return the tokens it submits. */
export async function checkIf(dav: Dav): Promise<Set<string>> {
  const lists = ifLists(dav);
  if (!lists) return new Set();
  if (!(await evaluateIf(lists, (r) => resourceState(dav, r)))) throw new DavError(412, 'If header precondition failed');
  return submittedTokens(lists);
}

/** Locks that would block a write to `targets` without their tokens. */
export function blockingLocks(dav: Dav, targets: WriteTarget[], submitted: ReadonlySet<string>): LockInfo[] {
  if (dav.locks.empty) return [];
  const uid = dav.ctx.principal.userId;
  const out: LockInfo[] = [];
  const held = (l: LockInfo) => submitted.has(l.token) && l.userId === uid;
  // RFC 4918 §6.1: any one holder of a shared lock may write what it covers with its own token, so
  // a shared lock does not block where the client holds another shared lock covering the same place
  // (the target, or the lock's own root when it lies below a deep target). Exclusive locks: unchanged.
  const sharesWithHeld = (vpath: string) => dav.locks.covering(vpath).some((m) => m.scope === 'shared' && held(m));
  // A storage mounted inside a deep target stays when the target is deleted or moved (the VFS leaves
  // it alone), locks included (follow-changes.ts): they blocked a DELETE (423) that REST makes.
  const mounts = dav.deps.mountPaths?.() ?? [];
  for (const t of targets) {
    const v = vpathOf(dav, t.path);
    const inner = mounts.filter((m) => m !== v && isWithin(v, m));
    const outside = (l: LockInfo) => !inner.some((m) => isWithin(m, l.root));
    const near = t.deep ? [...dav.locks.covering(v), ...dav.locks.within(v).filter(outside)] : dav.locks.covering(v);
    for (const l of near) if (!held(l) && !(l.scope === 'shared' && sharesWithHeld(isWithin(v, l.root) ? l.root : v))) out.push(l);
  }
  return out;
}

/** The full check for a write: If header, then locks. */
export async function checkWrite(dav: Dav, targets: WriteTarget[]): Promise<void> {
  const submitted = await checkIf(dav);
  const blocking = blockingLocks(dav, targets, submitted);
  // A lock token is proof only from the user who took the lock: another user sending it is refused
  // (403, as Apache mod_dav), not answered 423 lock-token-submitted for a token it did submit.
  if (blocking.some((l) => submitted.has(l.token))) throw new VfsError('FORBIDDEN', 'the submitted lock token belongs to another user');
  if (blocking.length) throw new DavError(423, 'the resource is locked', 'lock-token-submitted', await lockedHrefs(dav, blocking));
}

/** `<D:href>`s of the locked resources, for lock-token-submitted (RFC 4918 §16). */
async function lockedHrefs(dav: Dav, locks: LockInfo[]): Promise<string> {
  const out = new Set<string>();
  for (const l of locks) {
    let p = relativeTo(dav.ctx.principal.basePath, l.root) ?? '/'; // a lock above the user's root: their root
    let e: Entry | undefined;
    // A lock on something this user may not see (a hidden entry, inside a password folder) is named by
    // its nearest visible ancestor: the answer must not reveal the hidden name.
    while (p !== '/' && !(e = await dav.deps.vfs.stat(dav.ctx, p).catch(() => undefined))) p = parentOf(p);
    out.add(`<D:href>${esc(hrefOf(p, !e || e.isDir, dav.deps.siteBase))}</D:href>`);
  }
  return [...out].join('');
}
