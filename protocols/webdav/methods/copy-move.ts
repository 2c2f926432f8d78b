/**
 * COPY and MOVE (RFC 4918 §9.8-9.9): Destination (absolute URL or path, percent-encoded), Overwrite
 * (F: 412 when the target exists), Depth (COPY 0 or infinity, MOVE of a collection infinity). Dead properties go
 * with the resource; locks stay behind (they never follow a copy, and a moved source loses them).
 */
import { Readable } from 'node:stream';
import { isVfsError, VfsError } from '../../../src/errors.js';
import { isWithin } from '../../../src/paths.js';
import { checkPreconditions, checkWrite, type WriteTarget } from '../conditions.js';
import { DavError } from '../errors.js';
import { utf8Header } from '../../header-text.js';
import { parentOf, sendStatus, userPathOf, vpathOf, type Dav } from '../request.js';
import { requireParent, statOrUndefined } from './get-put.js';
import { storedPath } from '../unicode-names.js';

async function destinationOf(dav: Dav): Promise<string> {
  const h = dav.req.headers.destination;
  if (typeof h !== 'string' || h === '') throw new DavError(400, 'Destination header missing');
  // RFC 4918 §10.3: an absolute URI or an absolute path; a relative reference is a malformed header.
  if (!h.startsWith('/') && !/^[a-z][a-z0-9+.-]*:\/\//i.test(h)) throw new DavError(400, 'Destination must be absolute');
  const dst = userPathOf(utf8Header(h), dav.deps.siteBase);
  if (dst === undefined) throw new DavError(502, 'Destination is not on this WebDAV server');
  return storedPath(dav.deps.vfs, dav.ctx, dst); // Finder sends decomposed names (unicode-names.ts)
}

export async function copyMove(dav: Dav): Promise<void> {
  const move = dav.method === 'MOVE';
  const dst = await destinationOf(dav);
  const ow = String(dav.req.headers.overwrite ?? 'T').trim().toUpperCase();
  if (ow !== 'T' && ow !== 'F') throw new DavError(400, 'bad Overwrite header');
  const depth = String(dav.req.headers.depth ?? 'infinity').trim().toLowerCase();
  if (depth !== 'infinity' && depth !== '0') throw new DavError(400, 'bad Depth header');

  const { vfs } = dav.deps;
  const src = await vfs.stat(dav.ctx, dav.path);
  // RFC 4918 §9.9.2: a collection moves whole. For a file Depth means nothing, and Apache's mod_dav
  // takes a MOVE of one with Depth 0 (a 400 failed clients that send the header on every MOVE).
  if (move && src.isDir && depth !== 'infinity') throw new DavError(400, 'Depth must be infinity when moving a collection');
  if (dst === dav.path) throw new DavError(403, 'source and destination are the same');
  if (src.isDir && isWithin(dav.path, dst)) throw new DavError(403, 'cannot copy or move a collection into itself');
  // Overwriting an ancestor of the source would delete the source with it (and all its siblings):
  // refuse before anything is removed. 409 as Apache mod_dav ("Destination collection contains the Source").
  if (isWithin(dst, dav.path)) throw new DavError(409, 'the destination collection contains the source');
  await requireParent(dav, dst);
  const existing = await statOrUndefined(dav, dst);
  if (existing && ow === 'F') throw new DavError(412, 'the destination exists');
  checkPreconditions(dav, src);

  const targets: WriteTarget[] = [{ path: dst, deep: true }, { path: parentOf(dst) }];
  if (move) targets.push({ path: dav.path, deep: true }, { path: parentOf(dav.path) });
  await checkWrite(dav, targets);

  const vsrc = vpathOf(dav, dav.path);
  const vdst = vpathOf(dav, dst);
  // Files replace files in one step; anything involving a folder is removed first (RFC 4918 §9.8.4).
  const replaceInPlace = !!existing && !existing.isDir && !src.isDir;
  // RFC 4918 §7.5: what a MOVE (or COPY) puts in place of a locked resource is under that lock. The
  // VFS removes the old resource first, which drops its locks (follow-changes.ts): the holder (Finder,
  // saving over a file it has open, submitted the token above) would see its refresh, writes and
  // UNLOCK fail. So locks rooted at the destination are put back once the tree has settled.
  const kept = existing ? dav.locks.covering(vdst).filter((l) => l.root === vdst) : [];
  const newFolder = !move && src.isDir && depth === '0'; // a mkdir, not a transfer
  // Properties that will not fit refuse the COPY before anything is copied or replaced (dead-props.ts).
  if (!move) dav.props.checkCopy(vsrc, vdst, !newFolder);
  if (existing && !replaceInPlace) {
    // What the transfer would refuse is refused before the destination is removed (it was lost).
    if (!newFolder) await vfs.checkTransfer(move ? 'move' : 'copy', dav.ctx, dav.path, dst);
    else if (!(await vfs.facts(dav.ctx, parentOf(dst))).write) throw new VfsError('READ_ONLY'); // the mkdir's
    // Locks and dead properties of what is removed or moved follow the tree (follow-changes.ts).
    await vfs.remove(dav.ctx, dst);
  }
  if (move) {
    await moveOrCopyAcross(dav, dst, src.isDir, replaceInPlace);
  } else if (newFolder) {
    await vfs.mkdir(dav.ctx, dst);
    await dav.props.removeTree(vdst);
    await dav.props.apply(vdst, dav.props.get(vsrc).map((prop) => ({ op: 'set' as const, prop })));
  } else {
    await copy(dav, dst, src.isDir, replaceInPlace);
    // A copy the VFS made in one step already carried them; a streamed or member-by-member one did not.
    await dav.settled();
    await dav.props.copyTree(vsrc, vdst);
  }
  await dav.settled();
  await dav.locks.restore(kept);
  sendStatus(dav.res, existing ? 204 : 201);
}

/**
 * vfs.moveTo; between two storages (one network drive holding several, where a client's drag from
 * one folder to another is a MOVE) a copy, then the source goes: RFC 4918 §9.9 defines MOVE as that.
 * A copy that fails leaves the source whole. The VFS has checked the move bit before CROSS_MOUNT;
 * the copy and the removal check the copy and remove bits. What the user cannot see (hidden
 * entries) is neither copied nor removed: a folder holding such entries stays at the source.
 */
async function moveOrCopyAcross(dav: Dav, dst: string, isDir: boolean, overwrite: boolean): Promise<void> {
  const { vfs } = dav.deps;
  try {
    await vfs.moveTo(dav.ctx, dav.path, dst, { overwrite });
  } catch (e) {
    if (!isVfsError(e, 'CROSS_MOUNT')) throw e;
    // What would refuse the copy or the removal refuses before the copy (it answered 403 or 507
    // for a copy it had made, and the file was in both places).
    await vfs.checkTransfer('move', dav.ctx, dav.path, dst);
    dav.props.checkCopy(vpathOf(dav, dav.path), vpathOf(dav, dst));
    await copy(dav, dst, isDir, overwrite);
    await dav.settled();
    await dav.props.copyTree(vpathOf(dav, dav.path), vpathOf(dav, dst));
    await removeSeen(dav, dav.path, isDir);
  }
}

/** Remove what this user sees of `path`, bottom-up; a folder still holding anything else stays. */
async function removeSeen(dav: Dav, path: string, isDir: boolean): Promise<void> {
  const { vfs } = dav.deps;
  if (!isDir) return vfs.remove(dav.ctx, path);
  for (const c of (await vfs.list(dav.ctx, path)).entries) if (!c.virtual) await removeSeen(dav, `${path}/${c.name}`, c.isDir);
  await vfs.remove(dav.ctx, path, { onlyEmpty: true }).catch((e: unknown) => {
    // NOT_FOUND: a folder that is only its members' common prefix (S3 without a marker object) went
    // with its last member; the MOVE, done, answered 404.
    if (!isVfsError(e, 'NOT_EMPTY') && !isVfsError(e, 'NOT_FOUND')) throw e;
  });
}

/**
 * vfs.copyTo, with two fallbacks built from other VFS calls: a single file between two storages (or
 * in one that cannot copy) is streamed (read + put), and a folder the VFS cannot copy in one step (under a new name, or into
 * another storage) is re-created member by member (each member keeps its name, which every
 * copying driver supports).
 */
async function copy(dav: Dav, dst: string, isDir: boolean, overwrite: boolean, src = dav.path): Promise<void> {
  const { vfs } = dav.deps;
  try {
    await vfs.copyTo(dav.ctx, src, dst, { overwrite });
  } catch (e) {
    if (isDir && (isVfsError(e, 'NOT_SUPPORTED') || isVfsError(e, 'CROSS_MOUNT'))) {
      await vfs.mkdir(dav.ctx, dst);
      const { entries } = await vfs.list(dav.ctx, src);
      // Storages mounted below the folder are not part of it (a move in one storage leaves them too).
      for (const c of entries) if (!c.virtual) await copy(dav, `${dst}/${c.name}`, c.isDir, false, `${src === '/' ? '' : src}/${c.name}`);
      return;
    }
    // A file a storage cannot copy itself (FTP has no copy) is streamed too.
    if (isDir || !(isVfsError(e, 'CROSS_MOUNT') || isVfsError(e, 'NOT_SUPPORTED'))) throw e;
    const r = await vfs.read(dav.ctx, src);
    try {
      await vfs.put(dav.ctx, dst, r.stream as Readable, { size: r.entry.size, modified: r.entry.modified, overwrite: true });
    } finally {
      r.stream.destroy(); // a put refused before reading leaves the source open (a connection, a storage held)
    }
  }
}
