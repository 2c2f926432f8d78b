/**
 * Preconditions every write goes through: the `If` header must hold (else 412), and every lock that
 * covers a resource the write changes must have its token submitted by the lock's owner (else 423).
 */
import { isVfsError } from '../../src/errors.js';
import { DavError } from './errors.js';
import { evaluateIf, parseIf, submittedTokens, type IfList, type ResourceState } from './if-header.js';
import { etagOf } from './resource.js';
import { userPathOf, vpathOf, type Dav } from './request.js';
import type { LockInfo } from './locks.js';

export interface WriteTarget {
  /** User path changed by the write. */
  path: string;
  /** The write also changes everything below (DELETE, MOVE source, overwritten destination). */
  deep?: boolean;
}

/** The parsed `If` header, or undefined when there is none. */
export function ifLists(dav: Dav): IfList[] | undefined {
  const h = dav.req.headers['if'];
  return typeof h === 'string' && h.trim() !== '' ? parseIf(h) : undefined;
}

/** Current lock tokens and ETag of the resource an If list names. */
export async function resourceState(dav: Dav, resource: string | undefined): Promise<ResourceState> {
  const path = resource === undefined ? dav.path : userPathOf(resource, dav.deps.siteBase);
  if (path === undefined) return { tokens: new Set() };
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
  for (const t of targets) {
    const v = vpathOf(dav, t.path);
    const near = t.deep ? [...dav.locks.covering(v), ...dav.locks.within(v)] : dav.locks.covering(v);
    for (const l of near) if (!(submitted.has(l.token) && l.userId === uid)) out.push(l);
  }
  return out;
}

/** The full check for a write: If header, then locks. */
export async function checkWrite(dav: Dav, targets: WriteTarget[]): Promise<void> {
  const submitted = await checkIf(dav);
  if (blockingLocks(dav, targets, submitted).length) throw new DavError(423, 'the resource is locked', 'lock-token-submitted');
}
