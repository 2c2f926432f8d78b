/**
 * GET/HEAD (ranges, conditional requests, the storage's webdav_policy) and PUT (streamed straight
 * into vfs.put, which writes atomically).
 */
import { isVfsError, VfsError } from '../../../src/errors.js';
import { encodePathForUrl, locationOf } from '../../../src/paths.js';
import { signPath } from '../../../src/sign.js';
import type { ByteRange } from '../../../drivers/types.js';
import type { Entry } from '../../../src/vfs/types.js';
import { blockingLocks, checkPreconditions, checkWrite, conditional, hasPreconditions, ifLists } from '../conditions.js';
import { DavError } from '../errors.js';
import { contentTypeOf, etagOf, httpDate } from '../resource.js';
import { parentOf, sendStatus, type Dav } from '../request.js';
import { firstHeader } from '../../header-text.js';
import { uploadBody } from '../../upload-body.js';
import { knownModTime, parseHttpDate } from '../../http-date.js';

const seconds = (d: Date) => Math.floor(d.getTime() / 1000);

/** The single byte range asked for, undefined for the whole file; 'bad' when unsatisfiable. */
export function parseRange(header: string | undefined, size: number): ByteRange | undefined | 'bad' {
  if (!header || size === 0) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return undefined; // multi-range or junk: serve it all
  if (m[1] === '') {
    const n = Number(m[2]);
    return n === 0 ? 'bad' : { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || end < start) return 'bad';
  return { start, end };
}

function ifRangeHolds(h: string | undefined, e: Entry, etag: string): boolean {
  if (!h) return true;
  const v = h.trim();
  if (v.startsWith('"') || v.startsWith('W/')) return v === etag;
  // RFC 9110 §13.1.5: a date must equal Last-Modified exactly (an entity tag compares strongly, above).
  return knownModTime(e.modified) && parseHttpDate(v) === seconds(e.modified) * 1000;
}

/** A redirect the storage's webdav_policy asks for, or undefined to stream through treegate. */
async function policyRedirect(dav: Dav, e: Entry): Promise<string | undefined> {
  const { vfs, settings } = dav.deps;
  const storage = await vfs.storageOf(dav.ctx, dav.path, 'read');
  if (!storage) return undefined;
  if (storage.webdavPolicy === 'use_proxy_url') {
    const base = storage.downProxyUrl.split('\n')[0]!.trim().replace(/\/+$/, '');
    return base ? `${base}${encodePathForUrl(e.vpath)}?sign=${signPath(settings, e.vpath)}` : undefined;
  }
  if (storage.webdavPolicy === '302_redirect') {
    const { link } = await vfs.link(dav.ctx, dav.path);
    // A link that needs request headers (credentials) cannot be handed to the client.
    if (link.kind === 'url' && !Object.keys(link.headers ?? {}).length) return link.url;
  }
  return undefined;
}

/** Times GET starts over when the file changed between its stat and its read. */
const GET_TRIES = 3;

export async function get(dav: Dav, tries = GET_TRIES): Promise<void> {
  const head = dav.method === 'HEAD';
  const e = await dav.deps.vfs.stat(dav.ctx, dav.path);
  if (e.isDir) {
    if (head) return sendStatus(dav.res, 200, { 'Content-Type': 'text/html; charset=utf-8' });
    throw new VfsError('IS_A_DIR');
  }
  const etag = etagOf(e);
  const lastModified: Record<string, string> = knownModTime(e.modified) ? { 'Last-Modified': httpDate(e.modified) } : {};
  const headers: Record<string, string | number> = {
    ETag: etag,
    ...lastModified,
    'Accept-Ranges': 'bytes',
    'Content-Type': contentTypeOf(e.name),
  };
  const cond = conditional(dav, e);
  if (cond) return sendStatus(dav.res, cond, cond === 304 ? { ETag: etag, ...lastModified } : {});

  let range = ifRangeHolds(dav.req.headers['if-range'] as string | undefined, e, etag) ? parseRange(dav.req.headers.range, e.size) : undefined;
  if (range === 'bad') return sendStatus(dav.res, 416, { 'Content-Range': `bytes */${e.size}` });
  if (head) {
    const len = range ? range.end! - range.start + 1 : e.size;
    if (range) headers['Content-Range'] = `bytes ${range.start}-${range.end}/${e.size}`;
    dav.res.writeHead(range ? 206 : 200, { ...headers, 'Content-Length': len });
    return void dav.res.end();
  }
  const location = await policyRedirect(dav, e);
  if (location) return sendStatus(dav.res, 302, { Location: locationOf(location) });

  const r = await dav.deps.vfs.read(dav.ctx, dav.path, range);
  // Replaced since the stat (an upload renamed another file over it): the validators and the range
  // were worked out for the old file, so start over with the new one.
  if (r.entry.size !== e.size || r.entry.modified.getTime() !== e.modified.getTime()) {
    r.stream.destroy();
    if (tries <= 1) throw new VfsError('UPSTREAM', 'the file changed while it was being read');
    return get(dav, tries - 1);
  }
  if (r.start === 0 && r.end === r.entry.size - 1) range = undefined;
  if (range) headers['Content-Range'] = `bytes ${r.start}-${r.end}/${r.entry.size}`;
  dav.res.writeHead(range ? 206 : 200, { ...headers, 'Content-Length': Math.max(0, r.end - r.start + 1) });
  await r.sendTo(dav.res);
}

async function statOrUndefined(dav: Dav, path: string): Promise<Entry | undefined> {
  try {
    return await dav.deps.vfs.stat(dav.ctx, path);
  } catch (e) {
    if (isVfsError(e, 'NOT_FOUND')) return undefined;
    throw e;
  }
}

/** The parent a new member goes into must exist and be a collection (409 otherwise). */
export async function requireParent(dav: Dav, path: string): Promise<void> {
  const p = await statOrUndefined(dav, parentOf(path));
  if (!p || !p.isDir) throw new DavError(409, 'the parent collection does not exist');
}
export { statOrUndefined };

/**
 * Checks that must run before the VFS sees the PUT because they depend on whether the target
 * exists: an `If` header, If-Match/If-None-Match/If-Unmodified-Since, or a lock near the target (a lock on the parent blocks creating a member,
 * not replacing one). Such a PUT looks both paths up first, as before (409 before 423). Otherwise
 * (the common case) nothing can block the write, and vfs.put's own lookups answer 409 and 201/204.
 */
function preflight(dav: Dav): Promise<void> | undefined {
  const targets = [{ path: dav.path }, { path: parentOf(dav.path) }];
  // Nothing to look up: no promise either (the common PUT).
  if (!ifLists(dav) && !hasPreconditions(dav) && !blockingLocks(dav, targets, new Set()).length) return undefined;
  return lookedUpPreflight(dav, targets);
}

async function lookedUpPreflight(dav: Dav, targets: Array<{ path: string }>): Promise<void> {
  // Both looked up at once: the parent matters only when the target is new.
  const [existing, parentDir] = await Promise.all([statOrUndefined(dav, dav.path), statOrUndefined(dav, parentOf(dav.path))]);
  if (existing?.isDir) throw new VfsError('IS_A_DIR');
  if (!existing && !parentDir?.isDir) throw new DavError(409, 'the parent collection does not exist');
  checkPreconditions(dav, existing);
  await checkWrite(dav, existing ? [{ path: dav.path }] : targets);
}

/**
 * X-OC-Mtime: unix seconds, a fraction allowed, and negative for dates before 1970 (AList reads it
 * with strconv.ParseInt, which takes the sign). The first value when the header is repeated (Go's
 * Header.Get). Anything else is ignored (the file gets the upload time, and no `accepted`), and so
 * is a time past what a Date can hold (±8.64e15 ms): it became an Invalid Date, which a Memory
 * storage kept, listing the file as "Invalid Date" with the ETag "NaN-1".
 */
function ocMtime(dav: Dav): Date | undefined {
  const v = firstHeader(dav.req, 'x-oc-mtime')?.trim() ?? '';
  if (!/^[+-]?\d{1,16}(\.\d+)?$/.test(v)) return undefined;
  const d = new Date(Math.round(Number(v) * 1000)); // round: 0.123 * 1000 is 122.99999999999999
  return Number.isNaN(d.getTime()) ? undefined : d;
}

export async function put(dav: Dav): Promise<void> {
  // No partial PUT here: RFC 9110 §14.4 wants a 400 rather than the fragment stored as the whole file.
  if (dav.req.headers['content-range'] !== undefined) throw new DavError(400, 'PUT with Content-Range is not supported');
  // lftp's `put -c`/`reput` over http:// sends the resume offset as `Range: bytes=N-M/total` (not
  // Content-Range) with only the tail as body. RFC 9110 says to ignore Range on PUT, but doing so
  // stored the tail as the whole file and lftp reported success: refuse it like Content-Range.
  if (dav.req.headers.range !== undefined) throw new DavError(400, 'PUT with Range is not supported');
  // `x/` names a collection: storing a file as `x` would answer a request the client did not make
  // (nginx's dav module answers 409 the same way).
  if ((dav.req.url ?? '').split('?', 1)[0]!.endsWith('/')) throw new DavError(409, 'cannot PUT to a collection');
  const checking = preflight(dav);
  if (checking) await checking;
  const mtime = ocMtime(dav);
  const len = dav.req.headers['content-length'];
  const size = len !== undefined && /^\d+$/.test(len) ? Number(len) : undefined;
  const body = uploadBody(dav.req);
  let existed = false;
  // parents: false — a missing parent is NOT_A_DIR, which is WebDAV's 409 (errors.ts).
  const entry = await dav.deps.vfs.put(dav.ctx, dav.path, body, {
    size, modified: mtime, overwrite: true, parents: false, onTarget: (e) => (existed = e),
  }).catch((e: unknown) => {
    body.destroy(); // unpiped from the request, which the handler then drains (see upload-body.ts)
    throw e;
  });
  const headers: Record<string, string> = { ETag: etagOf(entry) };
  // Only when the storage kept it (an upstream WebDAV or S3 cannot set an mtime; put returns what
  // was stored): ownCloud-style clients take "accepted" as done and would not set it otherwise.
  if (mtime && Math.abs(entry.modified.getTime() - mtime.getTime()) < 1000) headers['X-OC-MTime'] = 'accepted';
  sendStatus(dav.res, existed ? 204 : 201, headers);
}
