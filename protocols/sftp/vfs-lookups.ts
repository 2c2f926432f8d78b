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

/**
 * ssh2 reads every name as UTF-8 and turns bytes that are not (a Latin-1 client's `é`) into U+FFFD:
 * `caf\xe9` and `caf\xe8` both arrive as `caf\ufffd`, and the second upload would silently replace
 * the first. A name holding U+FFFD is used when it exists (open, rename, remove) but never created:
 * the returned check (only for such names) refuses it.
 */
export function undecodedName(vfs: VfsApi, ctx: AccessContext, path: string): Promise<void> | undefined {
  if (!path.includes('\ufffd')) return undefined; // no await for other names: sshfs's STAT right after OPEN must find the handle
  return statOrUndefined(vfs, ctx, path).then((e) => {
    if (!e) throw new VfsError('INVALID', 'file name is not valid UTF-8');
  });
}
