import { lstatSync, lutimesSync, statSync, type Stats } from 'node:fs';
import { chmod, cp, lstat, mkdir, readdir, realpath, rename, rm, rmdir, stat, statfs, utimes } from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { Readable } from 'node:stream';
import { VfsError, fromErrno } from '../../src/errors.js';
import { basename, isRootPath, isWithin, join, normalize, parent, validateName } from '../../src/paths.js';
import type { Driver, DriverContext, Link, Obj, PutArgs, RemoveArgs, ThumbArgs } from '../types.js';
import { HostPaths } from './host-path.js';
import { isServed, listHostDir, TEMP_PREFIX } from './listing.js';
import { isAtOrAbove } from '../util/loops.js';
import { place, putFile, tempIn } from './put-file.js';
import { refuseDataDir } from './data-guard.js';
import { watchRoot } from './watch.js';
import { thumbSettings, Thumbnailer } from './thumbs.js';
import type { LocalOptions } from './index.js';

const NO_RECYCLE = 'delete permanently';

function toObj(dpath: string, st: Stats, thumbs: boolean): Obj {
  return objOf(basename(dpath), normalize(dpath), st, thumbs);
}

/** `thumbs`: files are offered with thumbnails (the thumbnail option, and ffmpeg is here). */
function objOf(name: string, path: string, st: Stats, thumbs: boolean): Obj {
  const isDir = st.isDirectory();
  const o: Obj = { name, path, size: isDir ? 0 : st.size, isDir, modified: st.mtime, created: st.birthtime };
  return thumbs && !isDir ? { ...o, hasThumb: true } : o;
}

/** `_YYYYMMDDhhmmss` in local time, AList's recycle-bin clash suffix. */
function stamp(d = new Date()): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `_${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

/**
 * A name this driver may create: upload temp files are named TEMP_PREFIX…, hidden from listings and
 * swept when stale, so a user's entry under such a name would vanish and could be deleted.
 */
function creatableName(name: string): string {
  if (validateName(name).startsWith(TEMP_PREFIX)) throw new VfsError('INVALID', `${name} is a reserved name`);
  return name;
}

/**
 * rm -r, with the real reason when an entry may not be removed: Node's rm retries an entry whose
 * unlink fails with EPERM as a folder and reports that attempt's ENOTDIR (scandir), so an
 * undeletable file (immutable, a sticky folder) was answered "not a folder" (WebDAV 409).
 */
async function rmTree(host: string): Promise<void> {
  await rm(host, { recursive: true }).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOTDIR' && e.syscall === 'scandir') throw Object.assign(e, { code: 'EPERM' });
    throw e;
  });
}

/**
 * What a folder copy takes along: what listings show (files, folders) and links. cp refused a FIFO
 * or socket, failing the whole copy (and a move or delete to another file system) for an entry
 * nobody sees, and it opened a device to copy it.
 */
const copied = async (src: string): Promise<boolean> => {
  const st = await lstat(src);
  return isServed(st) || st.isSymbolicLink();
};

async function exists(host: string): Promise<boolean> {
  return lstat(host).then(() => true, (e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return false;
    throw e;
  });
}

/**
 * What the link `target` leads to, undefined when nothing: dangling, or a loop (ELOOP), which get()
 * shows as not found and listings leave out; a loop failed the upload as a missing folder (the
 * folder exists). A link leaving the root stays FORBIDDEN.
 */
function leadsTo(paths: HostPaths, target: string, dpath: string): Stats | undefined {
  try {
    return statSync(paths.realOf(target, dpath), { throwIfNoEntry: false });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ELOOP') return undefined;
    throw e;
  }
}

export class LocalDriver implements Driver {
  /** put() checks its folder and target itself, before the body (Driver.checksPutTarget). */
  readonly checksPutTarget = true;
  private paths: HostPaths | undefined;
  private readonly root: string;
  private readonly mkdirMode: number;
  private thumbs: Thumbnailer | undefined;
  /** Listings offer thumbnails: the `thumbnail` option is on and ffmpeg runs here (found at init). */
  private listsThumbs = false;

  constructor(private readonly opts: LocalOptions, private readonly ctx: DriverContext) {
    this.root = opts.root_folder_path.trim() === '' ? '' : nodePath.resolve(opts.root_folder_path);
    // Digits 0-7 only, as AList's ParseUint(v, 8, 32): parseInt read '0o755' as 0 and '78' as 7.
    const perm = opts.mkdir_perm || '777';
    this.mkdirMode = /^[0-7]+$/.test(perm) ? parseInt(perm, 8) : NaN;
  }

  async init(signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    if (!Number.isInteger(this.mkdirMode) || this.mkdirMode < 0 || this.mkdirMode > 0o7777) {
      throw new VfsError('INVALID', `mkdir_perm ${this.opts.mkdir_perm} is not an octal mode`);
    }
    if (this.root === '') throw new VfsError('INVALID', 'root_folder_path is required: the host folder this storage serves');
    const st = await stat(this.root).catch(() => undefined);
    if (!st?.isDirectory()) throw new Error(`root folder ${this.root} not exists`);
    const real = await realpath(this.root);
    await refuseDataDir(real, this.opts.root_folder_path, this.ctx.dataDir);
    const thumbs = new Thumbnailer(thumbSettings(this.opts), this.ctx.log);
    if (thumbs.cacheFolder) await mkdir(thumbs.cacheFolder, { recursive: true, mode: this.mkdirMode });
    // Asked now only when listings would offer thumbnails: a missing ffmpeg is then warned about at init.
    this.listsThumbs = this.opts.thumbnail && (await thumbs.available());
    this.thumbs = thumbs;
    this.paths = new HostPaths(this.root, real);
  }

  async drop(): Promise<void> {
    this.paths = undefined;
    this.thumbs = undefined;
  }

  private get p(): HostPaths {
    if (!this.paths) throw new VfsError('STORAGE_UNAVAILABLE', 'storage not init');
    return this.paths;
  }

  /** Run an fs call on a checked host path, mapping errno to VfsError. */
  private async at<T>(dpath: string, fn: (host: string, real: string) => Promise<T>): Promise<T> {
    try {
      // Inside the try: the path walk's own failures (ELOOP through a looping link, EACCES) were
      // answered as a backend failure.
      const { host, real } = await this.p.resolve(dpath);
      return await fn(host, real);
    } catch (e) {
      throw fromErrno(e, dpath);
    }
  }

  // Lookups stat synchronously (see host-path.ts for why): a local stat takes microseconds.
  async get(path: string): Promise<Obj> {
    let found;
    try {
      // The path check's own lstat usually tells what is there (a plain entry or nothing).
      const { real, stats } = this.p.resolveWithStats(path);
      found = stats === null ? statSync(real, { throwIfNoEntry: false }) : stats;
    } catch (e) {
      throw fromErrno(e, path);
    }
    // A missing path is common (the target of an upload): one error object instead of three.
    if (!found || !isServed(found)) throw new VfsError('NOT_FOUND', undefined, { path });
    return toObj(path, found, this.listsThumbs);
  }

  async list(dir: Obj): Promise<Obj[]> {
    return this.at(dir.path, async (_h, real) => {
      if (!statSync(real).isDirectory()) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
      const entries = await listHostDir(real, this.opts.show_hidden, (r) => this.p.inside(r), this.loopCheck(dir.path, real));
      const base = dir.path === '/' ? '/' : join(dir.path) + '/';
      // Names from readdir hold no `/` or NUL and backslashes were left out: no per-entry join needed.
      return entries.map((e) => objOf(e.name, base + e.name, e.stats, this.listsThumbs));
    });
  }

  /**
   * For the listing of the folder `dpath` (real path `real`): whether a link to `target` loops, i.e.
   * `target` is that folder or one above it, really or along `dpath` (whose folders may be links
   * followed on the way, e.g. two folders linking to each other). The folders along `dpath` are
   * resolved once, at the first link (listing.ts asks only for links).
   */
  private loopCheck(dpath: string, real: string): (target: string) => boolean {
    let along: string[] | undefined;
    return (target) => {
      if (!along) {
        along = [real];
        for (let p = dpath; !isRootPath(p); ) along.push(this.p.resolveSync((p = parent(p))).real);
      }
      return along.some((r) => isAtOrAbove(target, r));
    };
  }

  async link(file: Obj): Promise<Link> {
    return this.at(file.path, async (_h, real) => {
      const st = statSync(real);
      if (st.isDirectory()) throw new VfsError('IS_A_DIR', undefined, { path: file.path });
      if (!st.isFile()) throw new VfsError('NOT_FOUND', undefined, { path: file.path });
      return { kind: 'file', path: real, size: st.size };
    });
  }

  /**
   * AList's Link with type `thumb` (see thumbs.ts); undefined (the file itself answers) when the
   * `thumbnail` option is off or the file is an svg. AList makes one whatever the option says; here
   * an admin who left it off does not have ffmpeg run on any picture a reader asks about.
   */
  async thumbnail(file: Obj, args: ThumbArgs): Promise<Link | undefined> {
    if (!this.opts.thumbnail || file.name.toLowerCase().endsWith('.svg')) return undefined;
    const thumbs = this.thumbs;
    if (!thumbs) throw new VfsError('STORAGE_UNAVAILABLE', 'storage not init');
    return this.at(file.path, async (host, real) => {
      const stats = await stat(real);
      if (stats.isDirectory()) throw new VfsError('IS_A_DIR', undefined, { path: file.path });
      if (!stats.isFile()) throw new VfsError('NOT_FOUND', undefined, { path: file.path });
      return thumbs.link({ name: file.name, host, real, stats }, args.source, args.signal);
    });
  }

  async mkdir(parent: Obj, name: string): Promise<Obj> {
    const dpath = join(parent.path, creatableName(name));
    await this.requireDir(parent.path);
    return this.at(dpath, async (host) => {
      await mkdir(host, { mode: this.mkdirMode });
      return toObj(dpath, await stat(host), false);
    });
  }

  private async requireDir(dpath: string): Promise<string> {
    return this.at(dpath, async (_h, real) => {
      if (!(await stat(real)).isDirectory()) throw new VfsError('NOT_A_DIR', undefined, { path: dpath });
      return real;
    });
  }

  /** The checked host paths of a source and a free destination name. */
  private async pair(src: string, dst: string): Promise<[string, string]> {
    const s = await this.p.resolve(src);
    const d = await this.p.resolve(dst);
    if (await exists(d.host)) throw new VfsError('EXISTS', undefined, { path: dst });
    await lstat(s.host).catch((e) => { throw fromErrno(e, src); });
    return [s.host, d.host];
  }

  async rename(obj: Obj, newName: string): Promise<Obj> {
    const dst = join(parent(obj.path), creatableName(newName));
    if (dst === obj.path) return this.get(dst);
    const [s, d] = await this.pair(obj.path, dst);
    await this.moveHost(s, d).catch((e) => { throw fromErrno(e, dst); });
    return this.get(dst);
  }

  private refuseIntoItself(obj: Obj, dstDir: Obj): void {
    if (isWithin(obj.path, dstDir.path)) throw new VfsError('INVALID', 'the destination folder is a subfolder of the source folder');
  }

  async move(obj: Obj, dstDir: Obj): Promise<Obj> {
    this.refuseIntoItself(obj, dstDir);
    await this.requireDir(dstDir.path);
    const dst = join(dstDir.path, creatableName(obj.name));
    const [s, d] = await this.pair(obj.path, dst);
    await this.moveHost(s, d).catch((e) => { throw fromErrno(e, dst); });
    return this.get(dst);
  }

  /**
   * Move host entry `s` to the free name `d`, never replacing: rename(2) replaces a file silently, so
   * two renames (or deletes into the recycle bin) to one name at once both succeeded and one file
   * was lost. The name is claimed in one step: a hard link for a file (place), an empty folder for a
   * folder, which rename(2) then replaces. Across file systems (the root spans several, or the bin
   * is on another) the entry is copied by copyHost, which claims the name the same way, and removed.
   */
  private async moveHost(s: string, d: string): Promise<void> {
    try {
      if (!(await lstat(s)).isDirectory()) return place(s, d, true);
      await mkdir(d, { mode: 0o700 });
      await rename(s, d).catch(async (e) => {
        await rmdir(d).catch(() => undefined);
        throw e;
      });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EXDEV') throw e;
      await this.copyHost(s, d);
      await rmTree(s);
    }
  }

  async copy(obj: Obj, dstDir: Obj): Promise<Obj> {
    this.refuseIntoItself(obj, dstDir);
    await this.requireDir(dstDir.path);
    const dst = join(dstDir.path, creatableName(obj.name));
    const [, d] = await this.pair(obj.path, dst);
    // The entry as listed: a link (inside the root) is copied as what it points to, as AList copies.
    // A copy of the link itself pointed elsewhere or nowhere from its new folder (a relative one).
    const { real } = await this.p.resolve(obj.path);
    await this.copyHost(real, d).catch((e) => { throw fromErrno(e, dst); });
    return this.get(dst);
  }

  /**
   * Copy host entry `s` to the free name `d`. A copy that fails (a full disk) leaves nothing under
   * the name: a file is copied to a hidden temp name and then placed (never replacing), a folder is
   * created here first and removed again.
   */
  private async copyHost(s: string, d: string): Promise<void> {
    const st = await lstat(s);
    // Made by this copy: a folder by mkdir (EEXIST if one appeared since pair()), a file's temp name.
    let made: string | undefined;
    try {
      if (st.isDirectory()) {
        await mkdir(d, { mode: this.mkdirMode });
        made = d;
        await cp(s, d, { recursive: true, preserveTimestamps: true, errorOnExist: true, force: false, verbatimSymlinks: true, filter: copied });
        await utimes(d, st.atime, st.mtime); // cp sets it, but adding the entries moved it on
        await chmod(d, st.mode & 0o7777); // as cp would have: made with mkdir_perm, a 0700 folder's copy was 0755
      } else {
        // Its own times until it is whole: an old file's mtime would make a listing sweep the temp
        // file as an upload's stale leftover (listing.ts) while it is still being written.
        made = tempIn(nodePath.dirname(d));
        await cp(s, made, { errorOnExist: true, force: false, verbatimSymlinks: true });
        // lutimes: a link moved to another file system is copied as a link, and utimes would set the
        // times of the file it points to. Synchronous, as the placing right after it: with an old
        // time on it the temp file is a stale leftover to a listing, which removed it in between.
        lutimesSync(made, st.atime, st.mtime);
        place(made, d, true);
      }
    } catch (e) {
      if (made !== undefined) await rm(made, { recursive: true, force: true });
      throw e;
    }
  }

  async remove(obj: Obj, args?: RemoveArgs): Promise<void> {
    if (isRootPath(obj.path)) throw new VfsError('FORBIDDEN', 'the storage root cannot be removed');
    const { host } = await this.p.resolve(obj.path);
    try {
      // onlyEmpty judges by the host folder itself, never the listing (which skips dotfiles when
      // show_hidden is off, and upload temp files): rmdir(2) refuses anything in it (ENOTEMPTY).
      const st = await lstat(host);
      const only = args?.onlyEmpty === true && st.isDirectory();
      const bin = this.opts.recycle_bin_path.trim();
      if (bin === '' || bin === NO_RECYCLE) {
        await (only ? rmdir(host) : rmTree(host));
        return;
      }
      if (only && (await readdir(host)).length) throw new VfsError('NOT_EMPTY', undefined, { path: obj.path });
      const binDir = nodePath.resolve(bin);
      await mkdir(binDir, { recursive: true, mode: this.mkdirMode });
      await this.toBin(host, nodePath.join(binDir, obj.name));
    } catch (e) {
      throw fromErrno(e, obj.path);
    }
  }

  /**
   * Move `host` into the recycle bin as `target`, or with AList's time stamp, then a counter, when
   * that is taken (moveHost never replaces: a second delete of one name within a second replaced
   * the first in the bin).
   */
  private async toBin(host: string, target: string): Promise<void> {
    const stamped = target + stamp();
    for (let i = 0; ; i++) {
      try {
        return await this.moveHost(host, i === 0 ? target : i === 1 ? stamped : `${stamped}_${i}`);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
    }
  }

  async put(dstDir: Obj, stream: Readable, args: PutArgs): Promise<Obj> {
    const dpath = join(dstDir.path, args.name);
    // The folder is resolved once; the target is its real path plus the name, the same directory
    // entry as the lexical path, so the final rename replaces the entry itself (never a link's target).
    let target: string;
    let dirReal: string;
    try {
      const dir = this.p.resolveWithStats(dstDir.path, false); // the target is joined to it here
      dirReal = dir.real;
      const st = dir.stats === null ? statSync(dirReal) : dir.stats;
      if (!st) throw new VfsError('NOT_FOUND', undefined, { path: dstDir.path });
      if (!st.isDirectory()) throw new VfsError('NOT_A_DIR', undefined, { path: dstDir.path });
      // Judged after the folder: a missing folder was answered first (409, No such file) when the
      // VFS looked the folder up itself, before checksPutTarget.
      target = nodePath.join(dirReal, creatableName(args.name));
      const entry = lstatSync(target, { throwIfNoEntry: false });
      let prior = entry;
      if (prior?.isSymbolicLink()) {
        // A link is what get() shows there: what it leads to, if that is served (a link leaving the
        // root is FORBIDDEN); a dangling one or one to a FIFO is nothing. An upload replaces the link.
        const to = leadsTo(this.p, target, dpath);
        prior = to && isServed(to) ? to : undefined;
      }
      if (prior?.isDirectory()) throw new VfsError('IS_A_DIR', undefined, { path: dpath });
      // A FIFO, socket or device is not shown, so an upload must not silently replace it either.
      if (prior && !prior.isFile()) throw new VfsError('FORBIDDEN', 'not a regular file', { path: dpath });
      // Any entry, a link leading nowhere too, fails noReplace's final link(2) with EEXIST, as it fails
      // open(2) with O_EXCL: refused now, not after the whole body (an SFTP OPEN with EXCL succeeded).
      if (entry && args.noReplace) throw new VfsError('EXISTS', 'file exists', { path: dpath });
      args.onTarget?.(prior !== undefined);
    } catch (e) {
      throw fromErrno(e, dpath);
    }
    return toObj(dpath, await putFile(dirReal, target, stream, args, dpath), this.listsThumbs);
  }

  async setModified(obj: Obj, modified: Date): Promise<void> {
    await this.at(obj.path, async (_h, real) => {
      const st = await stat(real);
      await utimes(real, st.atime, modified);
    });
  }

  watch(onChange: (dpath: string) => void): () => Promise<void> {
    return watchRoot(this.root, this.opts.show_hidden, onChange);
  }

  async usage(): Promise<{ total: number; free: number; used: number }> {
    const s = await statfs(this.root);
    const total = s.blocks * s.bsize;
    return { total, free: s.bavail * s.bsize, used: total - s.bfree * s.bsize };
  }
}
