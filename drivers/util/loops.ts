/**
 * Links that loop back, on remote storages whose listings follow links to folders (SFTP, FTP): a
 * link whose real target is the listed folder or one above it is left out of the listing, as the
 * Local driver does (with `isAtOrAbove` on its host paths). Every walk of the tree followed it (a folder copy task made 2^depth tasks).
 */
import { posix } from 'node:path';

/** Whether the real (POSIX) path `target` is the real path `real` or a folder above it. */
export const isAtOrAbove = (target: string, real: string): boolean =>
  real === target || real.startsWith(target.endsWith('/') ? target : target + '/');

/**
 * For the listing of the remote folder `remote` (under the storage root `root`): whether a link
 * whose real target is `target` loops, i.e. `target` is that folder or one above it, really or
 * along the path (whose folders may be links followed on the way, e.g. two folders linking to each
 * other). `realpath` asks the server. The folder is resolved once, at the first folder link; the
 * folders along the path only when the folder's real path is not its path (a link on the way: a
 * real path holds no link, so when it is the path itself, every folder above is its own real path
 * and a prefix of it). Tests: test/drivers-review-sftp-ftp-link-loops.test.ts.
 */
export function loopCheck(remote: string, root: string, realpath: (p: string) => Promise<string>): (target: string) => Promise<boolean> {
  // A root_folder_path given with a trailing slash keeps it (posix.normalize).
  const top = root.length > 1 ? root.replace(/\/+$/, '') : root;
  remote = remote.length > 1 ? remote.replace(/\/+$/, '') : remote;
  let along: Promise<string[]> | undefined;
  const resolve = async (): Promise<string[]> => {
    const out = [await realpath(remote)];
    if (out[0] === remote) return out;
    for (let p = remote; p !== top && p !== '/'; ) out.push(await realpath((p = posix.dirname(p))));
    return out;
  };
  return async (target) => (await (along ??= resolve())).some((r) => isAtOrAbove(target, r));
}
