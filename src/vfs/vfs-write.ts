/**
 * The write half of the VFS: mkdir, remove, put, setModified (moves, renames and copies are in
 * ./vfs-transfer.ts). Order of checks for every call: path checks and hide/password (Vfs.enter),
 * permission bits (./guard.ts), then the storage (virtual folders, storage roots), then the driver
 * capability.
 */
import type { Readable } from 'node:stream';
import { can, type AccessContext } from '../auth/principal.js';
import { isVfsError, VfsError } from '../errors.js';
import { basename, isRootPath, join, parent } from '../paths.js';
import type { CallArgs, Driver, Obj, PutArgs } from '../../drivers/types.js';
import { requireBit, requireCap, requireManage, requireWrite } from './guard.js';
import type { Entry, MkdirOptions, PutOptions, RemoveOptions, StorageLease } from './types.js';
import { mountsBelow, realObj } from './mount-folders.js';
import type { Located, Vfs } from './vfs.js';

export const DELETE_ROOT_MESSAGE = 'delete root folder is not allowed, please goto the manage page to delete the storage instead';

export class VfsWriter {
  constructor(private readonly vfs: Vfs) {}

  private get rules() {
    return this.vfs.deps.rules;
  }

  /** Storages are mounted below `vpath`: it is (at least) their virtual folder. */
  private mountsBelow(vpath: string): boolean {
    return mountsBelow(this.vfs, vpath);
  }

  async mkdir(ctx: AccessContext, path: string, opts: MkdirOptions = {}): Promise<Entry> {
    const vpath = await this.vfs.enter(ctx, path);
    await requireWrite(ctx, this.rules, parent(vpath));
    const loc = await this.vfs.locate(vpath);
    if (!loc) return this.vfs.virtualEntry(vpath);
    try {
      const tree = this.vfs.tree;
      if (opts.parents === false && !isRootPath(loc.dpath)) await this.existingDir(loc, this.vfs.args(ctx));
      const existing = await tree.tryObjAt(loc.mount, loc.dpath, this.vfs.args(ctx));
      if (existing && !existing.isDir) throw new VfsError('EXISTS', 'file exists', { path: vpath });
      if (!existing) requireCap(loc.mount.capabilities, 'canMkdir');
      const entry = this.vfs.entryOf(loc, existing ?? (await tree.ensureDir(loc.mount, loc.dpath, this.vfs.args(ctx))));
      if (!existing) this.vfs.emitFrom(loc.mount, { kind: 'mkdir', vpath, entry });
      return entry;
    } finally {
      this.vfs.release(loc);
    }
  }

  async remove(ctx: AccessContext, path: string, opts: RemoveOptions = {}): Promise<void> {
    const vpath = await this.vfs.enter(ctx, path);
    requireManage(ctx);
    requireBit(can.remove(ctx.principal));
    const loc = await this.vfs.locate(vpath);
    try {
      // A user's own root (their base path) neither: they would delete their home and lock themselves out.
      if (!loc || isRootPath(loc.dpath) || vpath === join(ctx.principal.basePath, '/')) throw new VfsError('FORBIDDEN', DELETE_ROOT_MESSAGE, { path: vpath });
      requireCap(loc.mount.capabilities, 'canRemove');
      const tree = this.vfs.tree;
      const args = this.vfs.args(ctx);
      const obj = await realObj(this.vfs, loc, args, DELETE_ROOT_MESSAGE);
      const d = tree.driver(loc.mount);
      // onlyEmpty is the driver's to judge: only it sees what its listing skips (see RemoveArgs).
      await tree.call(() => d.remove!(obj, opts.onlyEmpty ? { ...args, onlyEmpty: true } : args));
      tree.changed(loc.mount, loc.dpath, obj.isDir);
      this.vfs.emitFrom(loc.mount, { kind: 'remove', vpath });
    } finally {
      this.vfs.release(loc);
    }
  }

  /**
   * Stream a body into place. The body is handed to the driver untouched (never buffered here);
   * when a check fails first, it is left unread for the adapter to drain or discard.
   */
  async put(ctx: AccessContext, path: string, body: Readable, opts: PutOptions = {}): Promise<Entry> {
    const vpath = await this.vfs.enter(ctx, path);
    if (isRootPath(vpath)) throw new VfsError('IS_A_DIR', undefined, { path: vpath });
    if (opts.modified) requireTime(opts.modified, vpath);
    await requireWrite(ctx, this.rules, parent(vpath));
    const loc = await this.vfs.locate(vpath);
    // Held until the driver's put settles: an upload outlives an edit of its storage.
    try {
      const pin = opts.onlyOn;
      if (pin && (loc?.mount.id !== pin.id || loc.mount.vpath !== pin.mountPath)) {
        throw new VfsError('STORAGE_UNAVAILABLE', `storage [${pin.mountPath}] was deleted or changed`, { path: vpath, publicText: 'storage was changed or removed' });
      }
      // A path with mount points below is their folder even where the storage holding it has
      // nothing: a file put there hid them (listed instead of the folder, which then was `not a folder`).
      if (!loc || isRootPath(loc.dpath) || this.mountsBelow(vpath)) throw new VfsError('IS_A_DIR', undefined, { path: vpath });
      requireCap(loc.mount.capabilities, 'canPut');
      const tree = this.vfs.tree;
      const args = this.vfs.args(ctx);
      const d = tree.driver(loc.mount);
      const mounts = this.vfs.deps.mounts;
      // A pinned put stops (the driver drops its temp file) when its storage is withdrawn.
      const withdrawn = loc.mount.withdrawal.signal;
      const signal = !pin ? ctx.signal : ctx.signal ? AbortSignal.any([ctx.signal, withdrawn]) : withdrawn;
      const putArgs: PutArgs = {
        name: basename(vpath), size: opts.size, modified: opts.modified, hashes: opts.hashes, onProgress: opts.onProgress, release: opts.release, signal,
        ...(opts.overwrite === false ? { noReplace: true } : {}),
      };
      const lease: StorageLease = mounts.lease(loc.mount);
      const onTarget = opts.onTarget && ((existed: boolean) => opts.onTarget!(existed, lease));
      let made: Obj | void;
      try {
        // Into a virtual folder of mount points through existingDir, which makes it in the storage.
        made = opts.parents === false && d.checksPutTarget && !this.mountsBelow(parent(vpath))
          ? await this.putChecked(loc, d, body, putArgs, onTarget)
          : await this.putLookedUp(loc, d, body, putArgs, opts, args, onTarget);
        if (pin) lease.check(); // a driver that finished without looking at the signal
      } catch (e) {
        throw pin && withdrawn.aborted ? withdrawn.reason : e;
      }
      tree.changed(loc.mount, loc.dpath);
      const entry = this.vfs.entryOf(loc, made || (await tree.objAt(loc.mount, loc.dpath, args)));
      this.vfs.emitFrom(loc.mount, { kind: 'put', vpath, entry });
      return entry;
    } finally {
      this.vfs.release(loc);
    }
  }

  /** put's driver call after the VFS's own lookups of the target and its folder. */
  private async putLookedUp(loc: Located, d: Driver, body: Readable, putArgs: PutArgs, opts: PutOptions, args: CallArgs, onTarget: ((existed: boolean) => void) | undefined): Promise<Obj | void> {
    const tree = this.vfs.tree;
    // Without `parents` the folder is looked up first: a driver that resolves paths (Local) then
    // finds the target inside a folder it has just resolved.
    const folder = opts.parents === false ? await this.existingDir(loc, args) : undefined;
    const existing = await tree.tryObjAt(loc.mount, loc.dpath, args);
    if (existing?.isDir) throw new VfsError('IS_A_DIR', undefined, { path: loc.vpath });
    if (existing && opts.overwrite === false) throw new VfsError('EXISTS', 'file exists', { path: loc.vpath });
    const dir = folder ?? (await tree.ensureDir(loc.mount, parent(loc.dpath), args));
    onTarget?.(existing !== undefined);
    return tree.call(() => d.put!(dir, body, putArgs));
  }

  /**
   * put's driver call for a driver that checks the folder and the target itself, before the body
   * (Driver.checksPutTarget): the same answers as putLookedUp's, without looking anything up twice.
   */
  private async putChecked(loc: Located, d: Driver, body: Readable, putArgs: PutArgs, onTarget: ((existed: boolean) => void) | undefined): Promise<Obj | void> {
    const dpath = parent(loc.dpath);
    // Only the path of the folder is read (the flag's contract).
    const dir: Obj = { name: basename(dpath), path: dpath, size: 0, isDir: true, modified: new Date(0) };
    let checked = false;
    try {
      return await this.vfs.tree.call(() => d.put!(dir, body, { ...putArgs, onTarget: (existed) => ((checked = true), onTarget?.(existed)) }));
    } catch (e) {
      // A missing folder, found by the driver's checks: as putLookedUp's existingDir says it.
      if (!checked && isVfsError(e) && (e.code === 'NOT_FOUND' || e.code === 'NOT_A_DIR')) throw this.noFolder(loc);
      if (!checked && isVfsError(e, 'IS_A_DIR')) throw new VfsError('IS_A_DIR', undefined, { path: loc.vpath });
      if (!checked && isVfsError(e, 'EXISTS')) throw new VfsError('EXISTS', 'file exists', { path: loc.vpath });
      throw e;
    }
  }

  private noFolder(loc: Located): VfsError {
    return new VfsError('NOT_A_DIR', 'the parent folder does not exist', { path: parent(loc.vpath) });
  }

  /** The folder a put with `parents: false` goes into; missing or not a folder is NOT_A_DIR. */
  private async existingDir(loc: Located, args: { signal?: AbortSignal }): Promise<Obj> {
    const dir = await this.vfs.tree.tryObjAt(loc.mount, parent(loc.dpath), args);
    // A virtual folder of mount points is listed as there on every protocol: the storage makes it on first use (as transfer's).
    if (!dir && this.mountsBelow(parent(loc.vpath))) return this.vfs.tree.ensureDir(loc.mount, parent(loc.dpath), args);
    if (!dir?.isDir) throw this.noFolder(loc);
    return dir;
  }

  async setModified(ctx: AccessContext, path: string, modified: Date): Promise<void> {
    const vpath = await this.vfs.enter(ctx, path);
    requireTime(modified, vpath);
    await requireWrite(ctx, this.rules, parent(vpath));
    const loc = await this.vfs.locate(vpath);
    if (!loc) throw new VfsError('NOT_SUPPORTED', undefined, { path: vpath });
    try {
      requireCap(loc.mount.capabilities, 'canSetModified');
      const tree = this.vfs.tree;
      const args = this.vfs.args(ctx);
      // The virtual folder of mount points where the storage has no such folder has no time to set,
      // as one no storage covers (above): NOT_FOUND answered NO_SUCH_FILE for a folder stat shows.
      const obj = await realObj(this.vfs, loc, args, 'a virtual folder has no modification time to set', 'NOT_SUPPORTED');
      const d = tree.driver(loc.mount);
      await tree.call(() => d.setModified!(obj, modified, args));
      tree.changed(loc.mount, loc.dpath);
    } finally {
      this.vfs.release(loc);
    }
  }
}

/**
 * An mtime must be a real time: an Invalid Date reached the drivers (a Memory storage kept it and
 * listed the file as "Invalid Date", ETag "NaN-1"; Local failed with an untyped error).
 */
function requireTime(d: Date, vpath: string): void {
  if (Number.isNaN(d.getTime())) throw new VfsError('INVALID', 'invalid modification time', { path: vpath });
}
