/**
 * LOCK and UNLOCK (RFC 4918 §9.10-9.11): exclusive and shared write locks, depth 0 or infinity,
 * refresh through the If header, and lock-null resources (LOCK on an unmapped URL creates an empty
 * file, §9.10.4). Locks live in LockManager (persisted in the store).
 */
import { Readable } from 'node:stream';
import { can } from '../../../src/auth/principal.js';
import { VfsError } from '../../../src/errors.js';
import { checkIf, checkPreconditions, checkWrite, ifLists } from '../conditions.js';
import { DavError } from '../errors.js';
import { activeLock } from '../live-props.js';
import { parseTimeout, type LockInfo } from '../locks.js';
import { parentOf, readBody, sendStatus, vpathOf, type Dav } from '../request.js';
import { DAV_NS, XML_HEAD, child, elems, parseXml, serializeContent } from '../xml.js';
import { requireParent, statOrUndefined } from './get-put.js';

/**
 * Longest `<D:owner>` kept with a lock (characters). Clients send a name or a URL (Windows
 * `<D:href>DOMAIN\\user</D:href>`, Finder its webdav_fs URL); without a bound each of a user's 1,000
 * locks kept up to the whole 1 MiB body: 100 LOCKs made kv.jsonl 100 MB and the heap 190 MB larger,
 * and every PROPFIND of the file answered all of it.
 */
export const MAX_OWNER_CHARS = 4096;

export function parseLockInfo(body: string): { scope: LockInfo['scope']; owner: string } {
  const root = parseXml(body);
  if (root.ns !== DAV_NS || root.local !== 'lockinfo') throw new DavError(400, 'expected DAV:lockinfo');
  const scopeEl = child(root, DAV_NS, 'lockscope');
  const scope = scopeEl && elems(scopeEl, DAV_NS)[0]?.local;
  if (scope !== 'exclusive' && scope !== 'shared') throw new DavError(400, 'lockscope must be exclusive or shared');
  const typeEl = child(root, DAV_NS, 'locktype');
  if (!typeEl || !child(typeEl, DAV_NS, 'write')) throw new DavError(400, 'only write locks exist');
  const ownerEl = child(root, DAV_NS, 'owner');
  const owner = ownerEl ? serializeContent(ownerEl) : '';
  if (owner.length > MAX_OWNER_CHARS) throw new DavError(507, `the lock owner is longer than ${MAX_OWNER_CHARS} characters`);
  return { scope, owner };
}

function answer(dav: Dav, status: number, locks: LockInfo[], token?: string): void {
  const body =
    `${XML_HEAD}<D:prop xmlns:D="DAV:"><D:lockdiscovery>` +
    locks.map((l) => activeLock(l, dav.ctx.principal.basePath, dav.deps.siteBase)).join('') +
    `</D:lockdiscovery></D:prop>`;
  sendStatus(dav.res, status, { 'Content-Type': 'application/xml; charset=utf-8', ...(token ? { 'Lock-Token': `<${token}>` } : {}) }, body);
}

export async function lock(dav: Dav): Promise<void> {
  if (!can.webdavManage(dav.ctx.principal)) throw new VfsError('FORBIDDEN');
  const body = await readBody(dav.req);
  const timeout = parseTimeout(dav.req.headers.timeout as string | undefined);
  const vpath = vpathOf(dav, dav.path);
  if (body.trim() === '') return refresh(dav, vpath, timeout);

  const { scope, owner } = parseLockInfo(body);
  const depth = String(dav.req.headers.depth ?? 'infinity').trim().toLowerCase();
  if (depth !== '0' && depth !== 'infinity') throw new DavError(400, 'LOCK Depth must be 0 or infinity');
  const { vfs } = dav.deps;
  const existing = await statOrUndefined(dav, dav.path);
  if (existing) {
    if (!(await vfs.facts(dav.ctx, parentOf(dav.path))).write) throw new VfsError('READ_ONLY');
    checkPreconditions(dav, existing);
    await checkIf(dav);
  } else {
    await requireParent(dav, dav.path);
    checkPreconditions(dav, undefined);
    await checkWrite(dav, [{ path: parentOf(dav.path) }]);
  }
  const lockDepth = depth === '0' ? '0' : 'infinity';
  if (dav.locks.conflicts(vpath, lockDepth, scope).length) throw new DavError(423, 'the resource is locked', 'no-conflicting-lock');
  // Before the empty file of a lock on a new name is made, so a refused LOCK leaves none behind.
  dav.locks.checkRoom(dav.ctx.principal.userId);
  if (!existing) await vfs.put(dav.ctx, dav.path, Readable.from([]), { size: 0, overwrite: false });
  const l = await dav.locks.create({ root: vpath, depth: lockDepth, scope, owner, userId: dav.ctx.principal.userId, timeout }).catch(async (e: unknown) => {
    // Not granted (the store could not save it, or a LOCK racing this one won): no empty file either,
    // unless a PUT has filled it meanwhile (nothing held it back: the lock was not there yet).
    const made = !existing && (await statOrUndefined(dav, dav.path).catch(() => undefined));
    if (made && !made.isDir && made.size === 0) await vfs.remove(dav.ctx, dav.path).catch(() => undefined);
    throw e;
  });
  answer(dav, existing ? 200 : 201, [l], l.token);
}

async function refresh(dav: Dav, vpath: string, timeout: number): Promise<void> {
  if (!ifLists(dav)) throw new DavError(400, 'a LOCK without a body refreshes, and needs an If header');
  await dav.deps.vfs.stat(dav.ctx, dav.path);
  // The whole header must hold (RFC 4918 §10.4), entity tags included: `(<token> ["etag"])` refreshes
  // only while the resource is unchanged (412 otherwise). Taking its tokens alone refreshed regardless.
  const tokens = await checkIf(dav);
  const mine = dav.locks.covering(vpath).filter((l) => tokens.has(l.token) && l.userId === dav.ctx.principal.userId);
  // Another user's token refreshes nothing: 403, as for a write with it (conditions.ts checkWrite).
  if (!mine.length && dav.locks.covering(vpath).some((l) => tokens.has(l.token))) throw new VfsError('FORBIDDEN', 'the submitted lock token belongs to another user');
  if (!mine.length) throw new DavError(412, 'no lock to refresh', 'lock-token-matches-request-uri');
  const refreshed: LockInfo[] = [];
  for (const l of mine) refreshed.push((await dav.locks.refresh(l.token, timeout)) ?? l);
  answer(dav, 200, refreshed);
}

export async function unlock(dav: Dav): Promise<void> {
  const h = String(dav.req.headers['lock-token'] ?? '').trim();
  const token = h.startsWith('<') && h.endsWith('>') ? h.slice(1, -1) : '';
  if (!token) throw new DavError(400, 'Lock-Token header missing');
  const l = dav.locks.covering(vpathOf(dav, dav.path)).find((x) => x.token === token);
  const mayUnlock = !!l && (l.userId === dav.ctx.principal.userId || can.isAdmin(dav.ctx.principal));
  // Its holder releases a lock without the resource: one deleted on the storage itself (not through
  // treegate, so the lock stayed) answered 404 here, and its name stayed locked (423) for up to a day.
  if (!mayUnlock) await dav.deps.vfs.stat(dav.ctx, dav.path);
  if (!l) throw new DavError(409, 'no such lock on this resource', 'lock-token-matches-request-uri');
  if (!mayUnlock) throw new VfsError('FORBIDDEN');
  await dav.locks.remove(token);
  sendStatus(dav.res, 204);
}
