/**
 * Names in another Unicode normalization form than the stored one. macOS's WebDAV client (Finder,
 * WebDAVFS) sends every path decomposed (NFD: `é` as `e` + U+0301), whatever the href it listed;
 * Windows, Linux and most storages hold names composed (NFC). A byte-exact lookup then answers 404
 * for a file Finder has just listed (it cannot open, save over, rename or delete it), and a save
 * under the NFD name would create a second, identical-looking file next to it. So a request path
 * that does not exist as sent is looked up again, segment by segment, with each name in NFC and in
 * NFD (much as APFS finds names in either form). An exact name always wins; a new name is kept as
 * the client sent it. Only paths with characters that have another form pay for the lookups.
 */
import { isVfsError } from '../../src/errors.js';
import type { AccessContext } from '../../src/auth/principal.js';
import type { VfsApi } from '../../src/vfs/types.js';

/** True when some other normalization form of `s` differs from it (ASCII never does). */
const hasOtherForm = (s: string) => s.normalize('NFC') !== s || s.normalize('NFD') !== s;

/**
 * Whether `path` is there. Only "not found" says it is not: any other error (a remote that
 * stumbled) is the request's answer, or a save under the decomposed name wrote a second file next
 * to the stored one.
 */
async function exists(vfs: Pick<VfsApi, 'stat'>, ctx: AccessContext, path: string): Promise<boolean> {
  try {
    await vfs.stat(ctx, path);
    return true;
  } catch (e) {
    if (isVfsError(e, 'NOT_FOUND') || isVfsError(e, 'NOT_A_DIR')) return false;
    throw e;
  }
}

/** The stored path a client's user path names: `path` itself, or its equivalent under stored names. */
export async function storedPath(vfs: Pick<VfsApi, 'stat'>, ctx: AccessContext, path: string): Promise<string> {
  // eslint-disable-next-line no-control-regex
  if (!/[^\x00-\x7f]/.test(path) || !hasOtherForm(path)) return path;
  if (await exists(vfs, ctx, path)) return path;
  const segs = path.split('/').filter(Boolean);
  let out = '';
  for (let i = 0; i < segs.length; i++) {
    const seg = segs[i]!;
    if (!hasOtherForm(seg)) {
      out = `${out}/${seg}`;
      continue;
    }
    // The stored name is tried in both whole forms, not found by listing the folder: an upload of
    // many new accented names into a big folder would list it once per file. (A name stored in a
    // mix of forms is not found; no client is known to make one.) Hidden names stat as not found.
    let found: string | undefined;
    for (const name of new Set([seg, seg.normalize('NFC'), seg.normalize('NFD')])) {
      if (await exists(vfs, ctx, `${out}/${name}`)) {
        found = name;
        break;
      }
    }
    if (found === undefined) return [out, ...segs.slice(i)].join('/'); // not there in any form: a new name, as sent
    out = `${out}/${found}`;
  }
  return out;
}
