/**
 * The virtual folder of mount points: a path with storages mounted below it is listed and stat'ed
 * (Vfs.stat) even where the storage serving it has no such folder. The write side (./vfs-write.ts)
 * and moves and copies (./vfs-transfer.ts) refuse it alike where it would be removed or moved.
 */
import { isVfsError, VfsError } from '../errors.js';
import type { CallArgs, Obj } from '../../drivers/types.js';
import type { Located, Vfs } from './vfs.js';

/** Storages are mounted below `vpath`: it is (at least) their virtual folder. */
export function mountsBelow(vfs: Vfs, vpath: string): boolean {
  return vfs.deps.mounts.hasMountsBelow(vpath);
}

/**
 * The object to move, copy, remove or touch; a virtual folder of mount points is refused (`code`,
 * `message`) as where no storage is.
 */
export async function realObj(vfs: Vfs, loc: Located, args: CallArgs, message: string, code: 'FORBIDDEN' | 'NOT_SUPPORTED' = 'FORBIDDEN'): Promise<Obj> {
  try {
    return await vfs.tree.objAt(loc.mount, loc.dpath, args);
  } catch (e) {
    if (isVfsError(e, 'NOT_FOUND') && mountsBelow(vfs, loc.vpath)) throw new VfsError(code, message, { path: loc.vpath });
    throw e;
  }
}
