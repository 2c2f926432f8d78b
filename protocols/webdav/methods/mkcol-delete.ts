/** MKCOL (RFC 4918 §9.3) and DELETE (§9.6). */
import { VfsError } from '../../../src/errors.js';
import { checkPreconditions, checkWrite } from '../conditions.js';
import { DavError } from '../errors.js';
import { drain, hasBody, parentOf, sendStatus, type Dav } from '../request.js';
import { requireParent, statOrUndefined } from './get-put.js';

export async function mkcol(dav: Dav): Promise<void> {
  if (hasBody(dav.req)) {
    drain(dav.req);
    throw new DavError(415, 'MKCOL with a body is not supported');
  }
  if (dav.path === '/' || (await statOrUndefined(dav, dav.path))) throw new VfsError('EXISTS');
  await requireParent(dav, dav.path);
  checkPreconditions(dav, undefined);
  await checkWrite(dav, [{ path: parentOf(dav.path) }]);
  await dav.deps.vfs.mkdir(dav.ctx, dav.path);
  sendStatus(dav.res, 201);
}

export async function del(dav: Dav): Promise<void> {
  const e = await dav.deps.vfs.stat(dav.ctx, dav.path);
  const depth = String(dav.req.headers.depth ?? 'infinity').toLowerCase();
  if (e.isDir && depth !== 'infinity') throw new DavError(400, 'DELETE of a collection needs Depth: infinity');
  checkPreconditions(dav, e);
  await checkWrite(dav, [{ path: dav.path, deep: true }, { path: parentOf(dav.path) }]);
  await dav.deps.vfs.remove(dav.ctx, dav.path);
  await dav.settled(); // its locks and dead properties are gone (follow-changes.ts)
  sendStatus(dav.res, 204);
}
