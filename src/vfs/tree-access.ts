/**
 * The virtual tree as seen by drivers that present other parts of it (Alias): every call goes
 * through the VFS again with an internal principal, so meta rules keep applying (hidden paths are
 * NOT_FOUND, password-protected ones PASSWORD_REQUIRED) and one storage's rules cannot be
 * side-stepped by aliasing it somewhere else.
 */
import { Readable } from 'node:stream';
import type { Obj, TreeAccess } from '../../drivers/types.js';
import { bufferAtMost } from '../../drivers/util/streams.js';
import { PERM, ROLE, type AccessContext, type Principal } from '../auth/principal.js';
import type { Entry, VfsApi } from './types.js';

/** Can read and write, but neither sees hidden entries nor skips path passwords. */
const TREE_PRINCIPAL: Principal = {
  userId: 0,
  username: '@tree',
  role: ROLE.GENERAL,
  basePath: '/',
  permission: PERM.WRITE | PERM.RENAME | PERM.MOVE | PERM.COPY | PERM.REMOVE,
  disabled: false,
  otp: false,
  pwdTs: 0,
};

/** A thumbnail a backend answers at an address is a few KiB; more than this is refused, not held. */
export const MAX_URL_THUMB_BYTES = 8 * 1024 * 1024;

function toObj(e: Entry): Obj {
  const o: Obj = { name: e.name, path: e.vpath, size: e.size, isDir: e.isDir, modified: e.modified, created: e.created, hashes: e.hashes, thumb: e.thumb };
  // Kept so an Alias's listings offer its target's thumbnails (AList's alias passes them on).
  return e.hasThumb ? { ...o, hasThumb: true } : o;
}

export function treeAccessOf(vfs: VfsApi): TreeAccess {
  const ctx = (signal?: AbortSignal): AccessContext => ({ principal: TREE_PRINCIPAL, protocol: 'internal', ip: '', signal });
  return {
    stat: async (path, a) => toObj(await vfs.stat(ctx(a.signal), path)),
    list: async (path, a) => (await vfs.list(ctx(a.signal), path, a.refresh ? { refresh: true } : {})).entries.map(toObj),
    link: async (path, a) => {
      const { entry, link, storage } = await vfs.link(ctx(a.signal), path);
      // A storage that proxies (web_proxy, only_proxy, only_local) hands its backend's URL to no
      // client: shown through an Alias it was, as the alias's /d redirected there. Streamed through
      // the tree instead, as AList's alias links to the storage's /p.
      const proxies = storage.webProxy || storage.config.only_proxy || storage.config.only_local;
      if (link.kind !== 'url' || !proxies) return link;
      return { kind: 'range', size: entry.size, open: async (range, signal) => (await vfs.read(ctx(signal), path, range)).stream, lease: link.lease };
    },
    thumbnail: async (path, a) => {
      const t = await vfs.thumbnail(ctx(a.signal), path, a.source);
      if (!t) return undefined;
      if (t.size === undefined) {
        // A link needs its size; a thumbnail of unknown size (a backend's address) is a few KiB,
        // read whole, but never more than MAX_URL_THUMB_BYTES of what that backend sends.
        const png = await bufferAtMost(t.stream, MAX_URL_THUMB_BYTES, 'thumbnail');
        return { kind: 'range', size: png.length, open: async (r) => Readable.from([png.subarray(r?.start ?? 0, r?.end === undefined ? undefined : r.end + 1)]) };
      }
      // The tree opened the picture already: handed over whole to the one reader it is for (the
      // Alias's Vfs.thumbnail), not read into memory (a cached thumbnail is a file of any size).
      const { stream, size } = t;
      return { kind: 'range', size, open: async () => stream };
    },
    mkdir: async (path, a) => toObj(await vfs.mkdir(ctx(a.signal), path)),
    moveTo: async (src, dst, a) => toObj(await vfs.moveTo(ctx(a.signal), src, dst)),
    copyTo: async (src, dst, a) => toObj(await vfs.copyTo(ctx(a.signal), src, dst)),
    remove: async (path, a) => vfs.remove(ctx(a.signal), path, { onlyEmpty: a.onlyEmpty }),
    put: async (path, stream, a) =>
      toObj(await vfs.put(ctx(a.signal), path, stream, { size: a.size, modified: a.modified, hashes: a.hashes, onProgress: a.onProgress, ...(a.noReplace ? { overwrite: false } : {}) })),
    setModified: async (path, modified, a) => vfs.setModified(ctx(a.signal), path, modified),
  };
}
