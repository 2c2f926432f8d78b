/**
 * Moves, renames and copies in the VFS (the other writes are in ./vfs-write.ts). Order of checks:
 * path checks and hide/password (Vfs.enter), permission bits (./guard.ts), then the storages
 * (virtual folders, storage roots, mount points at the target, CROSS_MOUNT), then the driver
 * capabilities. Inside one storage the driver moves or copies; across storages the file is
 * streamed (moveAcross, copyAs), and REST makes a copy task of it instead (checkTransfer first).
 */
import { randomBytes } from 'node:crypto';
import { can, type AccessContext } from '../auth/principal.js';
import { isVfsError, VfsError } from '../errors.js';
import { basename, isRootPath, isWithin, join, parent } from '../paths.js';
import type { CallArgs, Obj } from '../../drivers/types.js';
import { requireBit, requireCap, requireManage, requireWrite } from './guard.js';
import { openLink } from './link.js';
import { mountsBelow, realObj } from './mount-folders.js';
import { setAside, type SetAside } from './set-aside.js';
import type { Entry, TransferOptions } from './types.js';
import type { Located, Vfs } from './vfs.js';

const SUBFOLDER_MESSAGE = 'the destination folder is a subfolder of the source folder';
const MOUNT_POINT_MESSAGE = 'a storage root or mount point cannot be moved or copied';
export const EXPOSE_MESSAGE = 'the folder holds entries hidden from you or protected by a password';

export class VfsTransfer {
  constructor(private readonly vfs: Vfs) {}

  private get rules() {
    return this.vfs.deps.rules;
  }

  /** Storages are mounted below `vpath`: it is (at least) their virtual folder. */
  private mountsBelow(vpath: string): boolean {
    return mountsBelow(this.vfs, vpath);
  }

  /**
   * The located (and held) source of a move/copy; virtual folders (see realObj: checked before CROSS_MOUNT,
   * or WebDAV moved one to another storage as an empty copy) and storage roots cannot be moved or copied.
   */
  private async source(vpath: string, args: CallArgs): Promise<Located> {
    const loc = await this.vfs.locate(vpath);
    if (!loc || isRootPath(loc.dpath)) {
      this.vfs.release(loc);
      throw new VfsError('FORBIDDEN', MOUNT_POINT_MESSAGE, { path: vpath });
    }
    if (this.mountsBelow(vpath)) await realObj(this.vfs, loc, args, MOUNT_POINT_MESSAGE).catch((e: unknown) => (this.vfs.release(loc), Promise.reject(e)));
    return loc;
  }

  /** The destination on the same mount as the source, or CROSS_MOUNT. */
  private async sameMountTarget(src: Located, vpath: string, args: { signal?: AbortSignal }): Promise<Located> {
    let loc: Located | undefined;
    try {
      loc = await this.vfs.locate(vpath);
    } catch (e) {
      if (e instanceof VfsError && e.code === 'NOT_FOUND') loc = undefined;
      else throw e;
    }
    this.vfs.release(loc); // the target must be on the source's mount, which the source holds
    if (!loc || loc.mount !== src.mount) {
      await this.refuseSamePlace(src.vpath, vpath, args);
      throw new VfsError('CROSS_MOUNT', undefined, { path: vpath });
    }
    if (isRootPath(loc.dpath)) throw new VfsError('EXISTS', `file [${basename(vpath)}] exists`, { path: vpath });
    return loc;
  }

  /**
   * Between storages both ends may still be one place, seen through an Alias: what adapters build
   * from other calls then destroyed it (WebDAV's MOVE removed the file it had just copied onto
   * itself; an overwriting COPY of a folder removed the source first). Refused as inside one storage.
   */
  private async refuseSamePlace(vs: string, vd: string, args: { signal?: AbortSignal }): Promise<void> {
    const [rs, rd] = await Promise.all([this.treePath(vs, args), this.treePath(vd, args)]);
    if (rs === vs && rd === vd) return; // no Alias at either end: two storages never overlap
    if (rs === rd || isWithin(rd, rs)) throw new VfsError('FORBIDDEN', 'the source and the destination are one place', { path: vd });
    if (isWithin(rs, rd)) throw new VfsError('INVALID', SUBFOLDER_MESSAGE);
  }

  /** The virtual path `vpath` stands for through storages that show the tree again (Driver.treePath). */
  private async treePath(vpath: string, args: { signal?: AbortSignal }): Promise<string> {
    for (let hops = 0; hops < 8; hops++) { // an alias of an alias; a loop is the alias's own error
      const loc = await this.vfs.locate(vpath).catch(() => undefined);
      try {
        const d = loc?.mount.driver;
        const next = loc && d?.treePath ? await d.treePath(loc.dpath, args).catch(() => undefined) : undefined;
        if (next === undefined) return vpath;
        vpath = next;
      } finally {
        this.vfs.release(loc);
      }
    }
    return vpath;
  }

  /** The permission bits a move or copy from `vs` to `vd` needs, checked before anything else. */
  private requireTransferBits(kind: 'move' | 'copy', ctx: AccessContext, vs: string, vd: string): void {
    const p = ctx.principal;
    requireManage(ctx);
    if (kind === 'copy') requireBit(can.copy(p));
    else if (parent(vs) === parent(vd)) requireBit(can.rename(p));
    else requireBit(can.move(p) && (basename(vs) === basename(vd) || can.rename(p)));
  }

  /** The driver capabilities a move or copy inside one storage needs. */
  private requireTransferCaps(kind: 'move' | 'copy', src: Located, vs: string, vd: string): void {
    const caps = src.mount.capabilities;
    const renames = basename(vs) !== basename(vd);
    if (kind === 'copy') requireCap(caps, 'canCopy');
    else if (parent(vs) === parent(vd)) requireCap(caps, 'canRename');
    else requireCap(caps, ...(renames ? ['canMove' as const, 'canRename' as const] : ['canMove' as const]));
  }

  /** checkTransfer: see VfsApi. */
  async checkTransfer(kind: 'move' | 'copy', ctx: AccessContext, srcPath: string, dstPath: string): Promise<void> {
    const vs = await this.vfs.enter(ctx, srcPath);
    const vd = await this.vfs.enter(ctx, dstPath);
    this.requireTransferBits(kind, ctx, vs, vd);
    if (vs !== vd && isWithin(vs, vd)) throw new VfsError('INVALID', SUBFOLDER_MESSAGE);
    // Mount points below the target (or what an Alias shows there) keep it taken (clearTarget) once WebDAV's Overwrite removed it.
    const taken = this.mountsBelow(vd) || this.mountsBelow(await this.treePath(vd, this.vfs.args(ctx)));
    if (taken) throw new VfsError('EXISTS', `file [${basename(vd)}] exists`, { path: vd });
    const src = await this.source(vs, this.vfs.args(ctx));
    try {
      // What the driver will refuse to move is refused before an adapter removes the destination.
      const fixed = kind === 'move' ? src.mount.driver?.unmovable?.(src.dpath) : undefined;
      if (fixed) throw new VfsError('NOT_SUPPORTED', fixed.reason, { path: vs });
      let dst: Located;
      try {
        dst = await this.sameMountTarget(src, vd, this.vfs.args(ctx));
      } catch (e) {
        if (!isVfsError(e, 'CROSS_MOUNT')) throw e;
        // Between storages a move is a copy and a removal (what adapters build from other calls): both
        // bits are asked first, or the copy was made and the removal then refused (a file in both places).
        if (kind === 'move') requireBit(can.copy(ctx.principal) && can.remove(ctx.principal));
        // And the source's storage must be able to remove (a read-only Alias cannot): WebDAV's MOVE
        // copied the file out, then answered 405 with the file in both places.
        if (kind === 'move') requireCap(src.mount.capabilities, 'canRemove');
        await requireWrite(ctx, this.rules, parent(vd)); // made of puts and mkdirs, which need it
        return;
      }
      const srcObj = await this.vfs.tree.objAt(src.mount, src.dpath, this.vfs.args(ctx));
      // A copy the storage cannot make itself is still made from other calls: a folder member by
      // member, a file streamed (read + put, as between storages). Only a move needs the driver's.
      if (kind === 'move') this.requireTransferCaps(kind, src, vs, vd);
      else if (!srcObj.isDir && !src.mount.capabilities.canCopy) requireCap(src.mount.capabilities, 'canPut');
      // Those copies are puts and mkdirs, which need the write the driver's own copy does not: asked
      // here, or the destination was removed, then the copy refused. A folder under a new name is the
      // driver's copy and rename (copyAs) unless its old name is taken in the target folder: asked
      // always, an overwriting COPY was refused (READ_ONLY) where one to a new name was made.
      if (kind === 'copy' && (!src.mount.capabilities.canCopy || (srcObj.isDir && (await this.copiedByMembers(src, dst, vs, vd, ctx))))) {
        await requireWrite(ctx, this.rules, parent(vd));
      }
      if (srcObj.isDir) await this.refuseExposure(ctx, src, srcObj, vd);
    } finally {
      this.vfs.release(src);
    }
  }

  /** A folder copy copyAs cannot make (a new name it cannot rename to), which adapters then make member by member. */
  private async copiedByMembers(src: Located, dst: Located, vs: string, vd: string, ctx: AccessContext): Promise<boolean> {
    if (basename(vs) === basename(vd)) return false;
    if (!src.mount.capabilities.canRename) return true;
    return !!(await this.vfs.tree.tryObjAt(src.mount, join(parent(dst.dpath), basename(vs)), this.vfs.args(ctx)));
  }

  /** moveTo / copyTo: see VfsApi. */
  async transfer(kind: 'move' | 'copy', ctx: AccessContext, srcPath: string, dstPath: string, opts: TransferOptions = {}): Promise<Entry> {
    const vs = await this.vfs.enter(ctx, srcPath);
    const vd = await this.vfs.enter(ctx, dstPath);
    const sameDir = parent(vs) === parent(vd);
    const newName = basename(vd);
    this.requireTransferBits(kind, ctx, vs, vd);
    if (vs !== vd && isWithin(vs, vd)) throw new VfsError('INVALID', SUBFOLDER_MESSAGE);
    const src = await this.source(vs, this.vfs.args(ctx));
    try {
      const dst = await this.sameMountTarget(src, vd, this.vfs.args(ctx));
      // Before the capabilities: a copy the storage cannot make is made as a task (REST) or streamed
      // (WebDAV), which onto itself would rewrite the file while reading it.
      if (kind === 'copy' && vs === vd) throw new VfsError('EXISTS', `file [${newName}] exists`, { path: vd });
      this.requireTransferCaps(kind, src, vs, vd);
      const tree = this.vfs.tree;
      const args = this.vfs.args(ctx);
      const srcObj = await tree.objAt(src.mount, src.dpath, args);
      if (vs === vd) return this.vfs.entryOf(dst, srcObj); // a move onto itself (a copy was refused above)
      const dstDir = this.mountsBelow(parent(vd)) ? await tree.ensureDir(dst.mount, parent(dst.dpath), args) : await tree.objAt(dst.mount, parent(dst.dpath), args);
      if (!dstDir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: parent(vd) });
      if (srcObj.isDir) await this.refuseExposure(ctx, src, srcObj, vd);
      const aside = await this.clearTarget(dst, srcObj, opts, args);
      const d = tree.driver(src.mount);
      let result: Obj | void;
      try {
        if (kind === 'move') {
          result = sameDir
            ? await tree.call(() => d.rename!(srcObj, newName, args))
            : await this.moveAcross(src, srcObj, dstDir, newName, args);
        } else {
          result = await this.copyAs(src, srcObj, dstDir, newName, ctx);
        }
      } catch (e) {
        await aside?.restore();
        throw e;
      }
      await aside?.drop(); // before the transfer's own change: what listens sees the old file go first
      if (kind === 'move') tree.changed(src.mount, src.dpath, srcObj.isDir);
      tree.changed(dst.mount, dst.dpath, true);
      const entry = this.vfs.entryOf(dst, result && result.name === newName ? result : await tree.objAt(dst.mount, dst.dpath, args));
      this.vfs.emitFrom(src.mount, { kind, vpath: vs, to: vd, entry });
      return entry;
    } finally {
      this.vfs.release(src);
    }
  }

  /**
   * A folder moved or copied in one driver call takes everything below it along, hidden entries and
   * password-protected folders included, while the rules stay at their old paths (MetaRules.exposure):
   * refuse when something this principal may not reach would become reachable at the target. The
   * storage's own listing is walked (hidden entries included), and only when rules can differ.
   */
  private async refuseExposure(ctx: AccessContext, src: Located, srcObj: Obj, vd: string): Promise<void> {
    const exposes = await this.rules.exposure(ctx.principal, ctx.password, src.vpath, vd);
    if (!exposes) return;
    const tree = this.vfs.tree;
    const args = this.vfs.args(ctx);
    const walk = async (dir: Obj, rel: string, depth: number): Promise<void> => {
      if (depth > 64) throw new VfsError('FORBIDDEN', EXPOSE_MESSAGE, { path: src.vpath }); // too deep to check: refuse
      for (const o of await tree.list(src.mount, dir, args)) {
        const r = tree.childPath(rel || '/', o.name); // undefined: a name no path can reach anyway
        if (r === undefined) continue;
        if (exposes(r)) throw new VfsError('FORBIDDEN', EXPOSE_MESSAGE, { path: join(src.vpath, r) });
        if (o.isDir) await walk(o, r, depth + 1);
      }
    };
    await walk(srcObj, '', 0);
  }

  /**
   * With overwrite, an existing file at the target makes way: set aside until the transfer is done
   * (./set-aside.ts), so a failed one loses nothing. Folders are never replaced.
   */
  private async clearTarget(dst: Located, srcObj: Obj, opts: TransferOptions, args: { signal?: AbortSignal }): Promise<SetAside | undefined> {
    const tree = this.vfs.tree;
    const existing = await tree.tryObjAt(dst.mount, dst.dpath, args);
    const name = basename(dst.vpath);
    // The folder of mount points below the target is taken even where the storage has nothing (see put).
    if (!existing && this.mountsBelow(dst.vpath)) throw new VfsError('EXISTS', `file [${name}] exists`, { path: dst.vpath });
    if (!existing) return undefined;
    if (!opts.overwrite || existing.isDir || srcObj.isDir) throw new VfsError('EXISTS', `file [${name}] exists`, { path: dst.vpath });
    requireCap(dst.mount.capabilities, 'canRemove');
    return setAside(tree, dst.mount, existing, () => {
      tree.changed(dst.mount, dst.dpath);
      this.vfs.emitFrom(dst.mount, { kind: 'remove', vpath: dst.vpath });
    });
  }

  /**
   * Move to another folder under a new name. Drivers move (keeping the name) and rename (in place)
   * separately, so the name must be free wherever the object passes: move then rename when the old
   * name is free in the target folder, else rename then move when the new name is free in the source
   * folder, else through a temporary name free in both. A failed later step is undone where possible.
   */
  private async moveAcross(src: Located, obj: Obj, dstDir: Obj, newName: string, args: { signal?: AbortSignal }): Promise<Obj | void> {
    const tree = this.vfs.tree;
    const d = tree.driver(src.mount);
    if (obj.name === newName) return tree.call(() => d.move!(obj, dstDir, args));
    const srcDirPath = parent(obj.path);
    const free = async (dir: string, name: string) => !(await tree.tryObjAt(src.mount, join(dir, name), args));
    const move = async (o: Obj, to: Obj): Promise<Obj> => {
      const moved = (await tree.call(() => d.move!(o, to, args))) || (await tree.objAt(src.mount, join(to.path, o.name), args));
      tree.changed(src.mount, o.path, o.isDir);
      tree.changed(src.mount, moved.path);
      return moved;
    };
    const rename = async (o: Obj, name: string): Promise<Obj> => {
      const renamed = (await tree.call(() => d.rename!(o, name, args))) || (await tree.objAt(src.mount, join(parent(o.path), name), args));
      tree.changed(src.mount, o.path, o.isDir);
      tree.changed(src.mount, renamed.path);
      return renamed;
    };
    /** Best-effort undo: the original error is what the caller sees. */
    const undo = async (fn: () => Promise<unknown>) => {
      await fn().catch(() => undefined);
    };
    const srcDir = () => tree.objAt(src.mount, srcDirPath, args);
    if (await free(dstDir.path, obj.name)) {
      const moved = await move(obj, dstDir);
      try {
        return await rename(moved, newName);
      } catch (e) {
        await undo(async () => move(moved, await srcDir()));
        throw e;
      }
    }
    if (await free(srcDirPath, newName)) {
      const renamed = await rename(obj, newName);
      try {
        return await move(renamed, dstDir);
      } catch (e) {
        await undo(() => rename(renamed, obj.name));
        throw e;
      }
    }
    let tmp = '';
    for (let i = 0; i < 5 && !tmp; i++) {
      const name = `treegate-move-${randomBytes(6).toString('hex')}`;
      if ((await free(srcDirPath, name)) && (await free(dstDir.path, name))) tmp = name;
    }
    if (!tmp) throw new VfsError('EXISTS', `no free temporary name to move [${obj.name}] as [${newName}]`, { path: obj.path });
    const renamed = await rename(obj, tmp);
    let moved: Obj;
    try {
      moved = await move(renamed, dstDir);
    } catch (e) {
      await undo(() => rename(renamed, obj.name));
      throw e;
    }
    try {
      return await rename(moved, newName);
    } catch (e) {
      await undo(async () => rename(await move(moved, await srcDir()), obj.name));
      throw e;
    }
  }

  /**
   * Copy under the target name. Same name: the driver's copy. A file under a new name is streamed
   * (link → put), so it works inside the same folder too; a folder under a new name is copied, then
   * renamed, which needs its old name to be free in the target folder.
   */
  private async copyAs(src: Located, obj: Obj, dstDir: Obj, newName: string, ctx: AccessContext): Promise<Obj | void> {
    const tree = this.vfs.tree;
    const d = tree.driver(src.mount);
    const args = this.vfs.args(ctx);
    if (obj.name === newName) return tree.call(() => d.copy!(obj, dstDir, args));
    if (!obj.isDir) {
      requireCap(src.mount.capabilities, 'canPut');
      const link = await tree.call(() => d.link(obj, args));
      const body = await openLink(link, undefined, ctx.signal);
      try {
        return await tree.call(() => d.put!(dstDir, body, { name: newName, size: obj.size, modified: obj.modified, signal: ctx.signal }));
      } finally {
        body.destroy(); // a put refused before reading left the source open (a descriptor, a connection)
      }
    }
    requireCap(src.mount.capabilities, 'canRename');
    const tmpPath = join(dstDir.path, obj.name);
    if (await tree.tryObjAt(src.mount, tmpPath, args)) {
      throw new VfsError('NOT_SUPPORTED', 'copying a folder under a new name into a folder holding its old name is not supported');
    }
    const copied = (await tree.call(() => d.copy!(obj, dstDir, args))) || (await tree.objAt(src.mount, tmpPath, args));
    tree.changed(src.mount, tmpPath, true);
    return tree.call(() => d.rename!(copied, newName, args));
  }

}
