/**
 * VFS look-ups shared by the request dispatcher (session.ts) and OPEN (handles.ts): a stat that
 * may find nothing, and telling a missing parent apart from a file in its place.
 */
import { posix } from 'node:path';
import type { AccessContext } from '../../src/auth/principal.js';
import { isVfsError, VfsError } from '../../src/errors.js';
import type { Entry, VfsApi } from '../../src/vfs/types.js';

/** The entry at `path`, or undefined when there is none; any other error is thrown. */
export async function statOrUndefined(vfs: VfsApi, ctx: AccessContext, path: string): Promise<Entry | undefined> {
  try {
    return await vfs.stat(ctx, path);
  } catch (e) {
    if (isVfsError(e, 'NOT_FOUND')) return undefined;
    throw e;
  }
}

/**
 * The put (parents: false) and mkdir (parents: false) refuse a missing parent, or a file in its
 * place, with NOT_A_DIR; OpenSSH answers NO_SUCH_FILE for the first (ENOENT): tell them apart.
 */
export async function missingParent(vfs: VfsApi, ctx: AccessContext, path: string, e: unknown): Promise<never> {
  if (isVfsError(e, 'NOT_A_DIR') && !(await statOrUndefined(vfs, ctx, posix.dirname(path)))) throw new VfsError('NOT_FOUND', undefined, { path: posix.dirname(path) });
  throw e;
}
