/**
 * Small uploads written to an unnamed file (O_TMPFILE) and then linked under their final name, where
 * the native addon (native/linkfd) and the file system allow: one directory change per upload instead
 * of two (a named temp file's create and its rename), and nothing left behind by a crash, since an
 * unnamed file is freed with its last descriptor. Elsewhere put-file.ts keeps the named temp file.
 */
import { constants, existsSync, openSync, renameSync, rmSync } from 'node:fs';
import { getSystemErrorName } from 'node:util';
import { loadNativeAddon } from '../../src/native-addon.js';

interface LinkFd {
  /** linkat of /proc/self/fd/<fd> to `path`, following the link: 0 or an errno. */
  link(fd: number, path: string): number;
  readonly O_TMPFILE: number;
}

// The link goes through /proc/self/fd: without /proc (a bare container), a named temp file it is.
const linkfd = existsSync('/proc/self/fd') ? loadNativeAddon<LinkFd>('linkfd') : undefined;
const EEXIST = 17;

/** An unnamed file in `dirReal`, open for writing; undefined where there is none to be had. */
export function openUnnamed(dirReal: string): number | undefined {
  if (!linkfd) return undefined;
  try {
    return openSync(dirReal, linkfd.O_TMPFILE | constants.O_WRONLY, 0o666);
  } catch {
    // No O_TMPFILE on this file system (EOPNOTSUPP, EISDIR on old kernels), or the folder is gone:
    // the named temp file's path reports what is wrong, if anything.
    return undefined;
  }
}

const errnoError = (err: number, path: string) => Object.assign(new Error(`${getSystemErrorName(-err)}: link '${path}'`), { code: getSystemErrorName(-err) });

/**
 * Give the unnamed file `fd` the name `target`. A link never replaces: with `noReplace` a name taken
 * meanwhile fails with EEXIST (the check and the naming are one step); otherwise the file is linked
 * under the temp name `temp()` gives and renamed over the target, as an upload replacing a file must.
 */
export function nameUnnamed(fd: number, target: string, noReplace: boolean | undefined, temp: () => string): void {
  const err = linkfd!.link(fd, target);
  if (err === 0) return;
  if (err !== EEXIST || noReplace) throw errnoError(err, target);
  const named = temp();
  const err2 = linkfd!.link(fd, named);
  if (err2 !== 0) throw errnoError(err2, named);
  try {
    renameSync(named, target);
  } catch (e) {
    rmSync(named, { force: true });
    throw e;
  }
}
