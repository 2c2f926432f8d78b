/**
 * Replacing a file by a copy or a move without risking it. The file in the way is set aside under a
 * temporary name in its folder (one rename), removed once the new file is in place, and renamed back
 * when the transfer fails (a full disk, a storage gone, a cancelled request): removed first, as it
 * was, a failed transfer lost it. Storages that cannot rename (or refuse to) still have it removed first.
 */
import { randomBytes } from 'node:crypto';
import type { Obj } from '../../drivers/types.js';
import { basename, join, parent } from '../paths.js';
import type { Mount } from './mounts.js';
import type { Tree } from './tree.js';

export interface SetAside {
  /** The transfer is done: remove the old file for good. */
  drop(): Promise<void>;
  /** The transfer failed: the old file takes its name back. */
  restore(): Promise<void>;
}

/** Recognisable if a storage failure leaves one behind; dot-named, so listings hide it by default. */
export const ASIDE_PREFIX = '.treegate-replaced-';

/** Move `existing` out of the way; undefined when it was removed instead (no rename, or one refused). */
export async function setAside(tree: Tree, m: Mount, existing: Obj, gone: () => void): Promise<SetAside | undefined> {
  const d = tree.driver(m);
  const name = ASIDE_PREFIX + randomBytes(6).toString('hex');
  // Without the request's signal, here and below: a cancelled request must still put the file back.
  const aside = d.rename
    ? await tree.call(async () => (await d.rename!(existing, name, {})) || (await tree.objAt(m, join(parent(existing.path), name), {}))).catch(() => undefined)
    : undefined;
  if (!aside) {
    // No rename, or one the storage refused (S3 renames by copying, which stops at 5 GB): as before.
    await tree.call(() => d.remove!(existing, {}));
    gone();
    return undefined;
  }
  tree.changed(m, existing.path);
  return {
    async drop() {
      // Best effort: the new file is in place and the transfer succeeded; a leftover keeps its name.
      // Under the name it had: a storage that keeps what is removed (Local's recycle bin) files it by
      // obj.name, and a bin entry named .treegate-replaced-… was no replaced file anyone could find.
      await tree.call(() => d.remove!({ ...aside, name: basename(existing.path) }, {})).catch(() => undefined);
      tree.changed(m, aside.path);
      gone();
    },
    async restore() {
      // A storage that failed the transfer may fail this too: the old file then keeps the aside name.
      await tree.call(() => d.rename!(aside, basename(existing.path), {})).catch(() => undefined);
      tree.changed(m, existing.path);
    },
  };
}
