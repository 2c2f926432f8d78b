/** OPTIONS: DAV class 1 and 2, and the methods the resource allows (all of them without credentials). */
import { isVfsError } from '../../../src/errors.js';
import { sendStatus, type Dav } from '../request.js';

const ALL = 'OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, COPY, MOVE, PROPFIND, PROPPATCH, LOCK, UNLOCK';
const DIR = 'OPTIONS, PROPFIND, PROPPATCH, DELETE, COPY, MOVE, LOCK, UNLOCK, HEAD';
const FILE = 'OPTIONS, GET, HEAD, PUT, DELETE, COPY, MOVE, PROPFIND, PROPPATCH, LOCK, UNLOCK';
const MISSING = 'OPTIONS, PUT, MKCOL, LOCK';

export const DAV_HEADERS = { DAV: '1, 2', 'MS-Author-Via': 'DAV', 'Accept-Ranges': 'bytes' };

export function optionsAnonymous(res: Dav['res']): void {
  sendStatus(res, 200, { ...DAV_HEADERS, Allow: ALL });
}

export async function options(dav: Dav): Promise<void> {
  let allow = ALL;
  try {
    allow = (await dav.deps.vfs.stat(dav.ctx, dav.path)).isDir ? DIR : FILE;
  } catch (e) {
    if (!isVfsError(e, 'NOT_FOUND')) throw e;
    allow = MISSING;
  }
  sendStatus(dav.res, 200, { ...DAV_HEADERS, Allow: allow });
}
