/**
 * VFS look-ups shared by the request dispatcher (session.ts) and OPEN (handles.ts): a stat that
 * may find nothing, telling a missing parent apart from a file in its place, and whether an upload
 * may still land.
 */
import { posix } from 'node:path';
import { can, type AccessContext } from '../../src/auth/principal.js';
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

/**
 * Refuse (FORBIDDEN) to land an upload whose user has lost the right to write it since OPEN: the
 * write bit (or a meta write rule), the SFTP manage bit, or the base_path it was opened under
 * (`basePath`, which the put resolved its path against). vfs.put checks once, when it starts; the
 * connection's principal follows users changes (server.ts), but an upload opened before one took
 * WRITEs for as long as the client liked and landed at CLOSE.
 */
export async function mayStillWrite(vfs: VfsApi, ctx: AccessContext, path: string, basePath: string): Promise<void> {
  const p = ctx.principal;
  if (p.basePath === basePath && can.manageOn(p, ctx.protocol) && (await vfs.facts(ctx, posix.dirname(path))).write) return;
  throw new VfsError('FORBIDDEN', 'the right to write this file was withdrawn while it was open', { path });
}
