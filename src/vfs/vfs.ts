/**
 * The VFS facade every protocol adapter calls (contract: ./types.ts). Each method joins the user
 * path to the principal's base path once, then enforces — here and nowhere else — hide rules,
 * path passwords, permission bits and driver capabilities, in that order. Write operations live in
 * ./vfs-write.ts and ./vfs-transfer.ts (moves, copies); this file holds the read side and the
 * shared entry checks.
 */
import { finished, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { AccessContext } from '../auth/principal.js';
import { fromErrno, isVfsError, VfsError } from '../errors.js';
import { basename, isRootPath, join, parent } from '../paths.js';
import type { ByteRange, CallArgs, Driver, Link, Obj, ThumbSource } from '../../drivers/types.js';
import type { ListingCache } from './cache.js';
import { copyFileSpan } from './file-copy.js';
import { clampRange, fileStream, openLink } from './link.js';
import { checkedReader, openFileReader, streamReader, type PositionalReader } from './positional.js';
import type { MetaRules } from './meta.js';
import type { Mount, MountTable } from './mounts.js';
import { WRITE, type Intent } from './balance.js';
import { toEntry, Tree } from './tree.js';
import type { DirFacts, Entry, Listing, MkdirOptions, PutOptions, ReadResult, RemoveOptions, StorageInfo, StorageLease, TransferOptions, VfsApi } from './types.js';
import { joinLeases } from './lease.js';
import { VfsTransfer } from './vfs-transfer.js';
import { VfsWriter } from './vfs-write.js';
import { ChangeFeed, type VfsChange, type VfsChangeListener } from './events.js';

export interface VfsDeps {
  mounts: MountTable;
  rules: MetaRules;
  cache: ListingCache;
}

/** A path inside a working mount, with the object found there. */
export interface Located {
  vpath: string;
  mount: Mount;
  dpath: string;
}

export class Vfs implements VfsApi {
  /** Internal helpers shared with VfsWriter; not for adapters. */
  readonly tree: Tree;
  /** Change notifications (./events.ts); VfsWriter emits into it too. */
  readonly changes = new ChangeFeed();
  private readonly writer: VfsWriter;
  private readonly transfers: VfsTransfer;
  /** Write calls under way, and who waits for there to be none (settled). */
  private writes = 0;
  private readonly idle = new Set<() => void>();

  constructor(readonly deps: VfsDeps) {
    this.tree = new Tree(deps.cache, (m) => deps.mounts.groupIds(m));
    this.writer = new VfsWriter(this);
    this.transfers = new VfsTransfer(this);
  }

  /**
   * Whether what an operation on `m` did is where its virtual paths say. An instance retired while
   * the operation ran (an upload outlasting an edit of its storage) may no longer be served there:
   * announced, a move of the mount path left a ghost of the file at the old path in the search
   * index (found, then `object not found`). Only when the storage still serves the same place.
   */
  announces(m: Mount): boolean {
    return this.deps.mounts.inPlace(m);
  }

  /** Emit a change made on `m` (see announces). */
  emitFrom(m: Mount, change: VfsChange): void {
    if (this.announces(m)) this.changes.emit(change);
  }

  /** Be told about every successful change (and listing) as it happens; returns the unsubscribe function. */
  onChange(listener: VfsChangeListener): () => void {
    return this.changes.on(listener);
  }

  /** User path → absolute VPath under the base path (`..`, NUL, `\` → INVALID), then hide and password checks. */
  async enter(ctx: AccessContext, path: string): Promise<string> {
    const vpath = join(ctx.principal.basePath, path);
    await this.deps.rules.assertAccess(ctx.principal, vpath, ctx.password);
    return vpath;
  }

  args(ctx: AccessContext): CallArgs {
    return { signal: ctx.signal };
  }

  /** The entry for a virtual folder (`/` is AList's `root`). */
  virtualEntry(vpath: string): Entry {
    if (isRootPath(vpath)) return { name: 'root', size: 0, isDir: true, modified: new Date(0), vpath, virtual: true };
    const name = basename(vpath);
    const found = this.deps.mounts.childMounts(parent(vpath)).find((e) => e.name === name);
    return found ?? { name, size: 0, isDir: true, modified: new Date(0), vpath, virtual: true };
  }

  /** Entry of the object at a mount path (the mount root is named after its mount point). */
  entryOf(loc: Located, o: Obj): Entry {
    return toEntry(o, loc.vpath, isRootPath(loc.dpath) ? basename(loc.vpath) || 'root' : o.name);
  }

  /**
   * Resolve a checked vpath; undefined for a virtual folder. The mount comes held (MountTable.resolve),
   * so a storage edited meanwhile lets the operation finish on the instance it started on:
   * `release` it when the operation is over. In a `.balance` group, `intent` picks the member
   * (./balance.ts): everything that changes the tree goes to the primary (the default).
   */
  async locate(vpath: string, intent: Intent = WRITE): Promise<Located | undefined> {
    const r = await this.deps.mounts.resolve(vpath, intent);
    return r.kind === 'mount' ? { vpath, mount: r.mount, dpath: r.dpath } : undefined;
  }

  /** The intent of reads made for `ctx`'s request: in a `.balance` group, all go to one member, in turns across requests. */
  private reading(ctx: AccessContext): Intent {
    return { kind: 'read', request: ctx.request ?? ctx };
  }

  /**
   * locate for lookups that describe a path (stat, list, usage, storageOf): a storage out of service (disabled, init failed) at a path
   * with mount points below is their virtual folder, as AList lists the virtual files when the
   * storage fails. Without this, disabling the storage at `/` made `/` unlistable on every protocol
   * while the storages below it worked.
   */
  private async locateForRead(vpath: string, intent: Intent): Promise<Located | undefined> {
    try {
      return await this.locate(vpath, intent);
    } catch (e) {
      if (this.virtualInstead(e, vpath)) return undefined;
      throw e;
    }
  }

  /** locate's error `e` at `vpath` is a storage out of service with mount points below (see locateForRead). */
  private virtualInstead(e: unknown, vpath: string): boolean {
    return isVfsError(e, 'STORAGE_UNAVAILABLE') && this.deps.mounts.hasMountsBelow(vpath);
  }

  release(loc: Located | undefined): void {
    if (loc) this.deps.mounts.release(loc.mount);
  }

  /**
   * The object at a located path; undefined when the storage lacks it but mount points lie below
   * it. Such a path is the virtual folder listing them (with the default Local storage at `/`, a
   * storage at `/a/b` shows `a` in `/`): without this it was listed but `object not found` when
   * opened. AList too answers its virtual files when the storage has nothing there.
   */
  private async objOrVirtual(loc: Located, ctx: AccessContext): Promise<Obj | undefined> {
    try {
      return await this.tree.objAt(loc.mount, loc.dpath, this.args(ctx));
    } catch (e) {
      if (isVfsError(e, 'NOT_FOUND') && this.deps.mounts.hasMountsBelow(loc.vpath)) return undefined;
      throw e;
    }
  }

  async stat(ctx: AccessContext, path: string): Promise<Entry> {
    const vpath = await this.enter(ctx, path);
    const loc = await this.locateForRead(vpath, this.reading(ctx));
    if (!loc) return this.virtualEntry(vpath);
    try {
      const obj = await this.objOrVirtual(loc, ctx);
      return obj ? this.entryOf(loc, obj) : this.virtualEntry(vpath);
    } finally {
      this.release(loc);
    }
  }

  async list(ctx: AccessContext, path: string, opts: { refresh?: boolean } = {}): Promise<Listing> {
    const vpath = await this.enter(ctx, path);
    const p = ctx.principal;
    if (opts.refresh && !(await this.deps.rules.canWrite(p, vpath))) throw new VfsError('READ_ONLY', 'Refresh without permission');
    let loc: Located | undefined;
    // The storage here is out of service (see locateForRead): its own entries are unknown, not
    // absent, so the listing is not announced (the search index dropped the storage's rows).
    let partial = false;
    try {
      loc = await this.locate(vpath, this.reading(ctx));
    } catch (e) {
      if (!this.virtualInstead(e, vpath)) throw e;
      partial = true;
    }
    let dir: Entry | undefined;
    const entries: Entry[] = [];
    let storage: StorageInfo | undefined;
    if (loc) {
      try {
        const dirObj = await this.objOrVirtual(loc, ctx);
        if (dirObj && !dirObj.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: vpath });
        if (dirObj) {
          dir = this.entryOf(loc, dirObj);
          storage = this.deps.mounts.info(loc.mount);
          for (const o of await this.tree.list(loc.mount, dirObj, this.args(ctx), opts.refresh)) {
            const child = this.tree.childPath(vpath, o.name);
            if (child) entries.push(toEntry(o, child));
          }
        }
      } finally {
        this.release(loc);
      }
    }
    dir ??= this.virtualEntry(vpath);
    // Mount points below show as folders after the real objects; a real object of the same name wins.
    const real = new Set(entries.map((e) => e.name));
    for (const v of this.deps.mounts.childMounts(vpath)) if (!real.has(v.name)) entries.push(v);
    if (this.changes.active && !partial && (!loc || this.announces(loc.mount))) this.changes.emit({ kind: 'listed', vpath, entries: [...entries] });
    const hide = await this.deps.rules.hidePatterns(p, vpath);
    const visible = hide.length ? entries.filter((e) => !hide.some((re) => re.test(e.name))) : entries;
    return { dir, entries: visible, storage, facts: await this.deps.rules.facts(p, vpath) };
  }

  async facts(ctx: AccessContext, path: string): Promise<DirFacts> {
    const vpath = await this.enter(ctx, path);
    return this.deps.rules.facts(ctx.principal, vpath);
  }

  async storageOf(ctx: AccessContext, path: string, purpose: 'read' | 'write' = 'write'): Promise<StorageInfo | undefined> {
    const loc = await this.locateForRead(await this.enter(ctx, path), purpose === 'read' ? this.reading(ctx) : WRITE);
    this.release(loc); // what info reports is the record's, no driver is used
    return loc && this.deps.mounts.info(loc.mount);
  }

  /**
   * A file's location, object and link; folders (real or virtual) are IS_A_DIR. The mount stays
   * held (see locate) when this returns.
   */
  private fileLink(ctx: AccessContext, path: string): Promise<{ loc: Located; obj: Obj; link: Link }> {
    return this.fileCall(ctx, path, (d, obj, args) => d.link(obj, args));
  }

  /** fileLink with another driver call for the link (a thumbnail's). */
  private async fileCall<L>(ctx: AccessContext, path: string, call: (d: Driver, obj: Obj, args: CallArgs) => Promise<L>): Promise<{ loc: Located; obj: Obj; link: L }> {
    const vpath = await this.enter(ctx, path);
    const loc = await this.locate(vpath, this.reading(ctx));
    if (!loc) throw new VfsError('IS_A_DIR', undefined, { path: vpath });
    try {
      const obj = await this.tree.objAt(loc.mount, loc.dpath, this.args(ctx));
      if (obj.isDir) throw new VfsError('IS_A_DIR', undefined, { path: vpath });
      const d = this.tree.driver(loc.mount);
      const link = await this.tree.call(() => call(d, obj, this.args(ctx)));
      return { loc, obj, link };
    } catch (e) {
      this.release(loc);
      throw e;
    }
  }

  /**
   * A stream from the driver (a remote storage's connection) keeps the mount held until it ends,
   * fails or is destroyed. A host file is read without the driver: that result holds nothing.
   */
  async read(ctx: AccessContext, path: string, range?: ByteRange): Promise<ReadResult> {
    const { loc, obj, link } = await this.fileLink(ctx, path);
    let held: Readable | undefined;
    try {
      const size = link.kind === 'url' ? obj.size : link.size;
      const span = clampRange(range, size);
      const entry = this.entryOf(loc, obj);
      if (link.kind === 'file') {
        // The stream is opened only if asked for: sendTo copies without one (file-copy.ts).
        let stream: Readable | undefined;
        const { path: host } = link;
        return {
          entry, start: span.start, end: span.end, lease: this.leaseOf(loc, link),
          get stream() {
            return (stream ??= fileStream(host, span, ctx.signal));
          },
          sendTo: (dest) => (stream ? pipeline(stream, dest) : copyFileSpan(host, span.start, span.end, dest, ctx.signal, { size: obj.size, modified: obj.modified })),
        };
      }
      let stream: Readable;
      try {
        stream = await openLink(link, range ? span : undefined, ctx.signal);
      } catch (e) {
        throw e instanceof VfsError ? e : new VfsError('UPSTREAM', undefined, { path: loc.vpath, cause: e });
      }
      held = stream;
      return { entry, stream, start: span.start, end: span.end, sendTo: (dest) => pipeline(stream, dest), lease: this.leaseOf(loc, link) };
    } finally {
      if (held) finished(held, () => this.release(loc));
      else this.release(loc);
    }
  }

  /**
   * Like read, for reads by offset; a reader of driver streams holds the mount until it is closed.
   * Each read is a request of its own (an SFTP READ): refused once the storage is withdrawn (deleted,
   * disabled, moved, options changed: MountTable.serves), however long the reader stays open.
   */
  async openReader(ctx: AccessContext, path: string): Promise<{ entry: Entry; reader: PositionalReader }> {
    const { entry, reader, lease } = await this.openReaderOn(ctx, path);
    return { entry, reader: checkedReader(reader, lease) };
  }

  private async openReaderOn(ctx: AccessContext, path: string): Promise<{ entry: Entry; reader: PositionalReader; lease: StorageLease }> {
    const { loc, obj, link } = await this.fileLink(ctx, path);
    const lease = this.leaseOf(loc, link);
    const entry = this.entryOf(loc, obj);
    if (link.kind === 'file') {
      this.release(loc);
      // Opened now: the handle reads the file found by this lookup, described by its own stats.
      const { reader, stats } = await openFileReader(link.path).catch((e: unknown) => {
        throw fromErrno(e, loc.vpath);
      });
      const same = stats.size === entry.size && stats.mtime.getTime() === entry.modified.getTime();
      return { entry: same ? entry : { ...entry, size: stats.size, modified: stats.mtime, hashes: undefined }, reader, lease };
    }
    const size = link.kind === 'url' ? obj.size : link.size;
    const open = async (position: number) => {
      if (position >= size) return undefined;
      try {
        return await openLink(link, { start: position, end: size - 1 }, ctx.signal);
      } catch (e) {
        throw e instanceof VfsError ? e : new VfsError('UPSTREAM', undefined, { path: loc.vpath, cause: e });
      }
    };
    return { entry, reader: streamReader(open, () => this.release(loc)), lease };
  }

  /**
   * The storage instances `link`'s bytes come from: `loc`'s, and those of a link the driver got
   * through the tree (an Alias's target: the tree's link carries its own lease).
   */
  private leaseOf(loc: Located, link: Link): StorageLease {
    return joinLeases(this.deps.mounts.lease(loc.mount), link.lease);
  }

  async thumbnail(ctx: AccessContext, path: string, source: ThumbSource): Promise<{ entry: Entry; size?: number; stream: Readable } | undefined> {
    const { loc, obj, link } = await this.fileCall(ctx, path, async (d, o, args) => d.thumbnail?.(o, { ...args, source }));
    try {
      if (!link) return undefined;
      const stream = await openLink(link, undefined, ctx.signal).catch((e: unknown) => {
        throw e instanceof VfsError ? e : new VfsError('UPSTREAM', undefined, { path: loc.vpath, cause: e });
      });
      // A thumbnail is a few KiB, in memory or in a cache file: nothing of the driver to hold on to.
      return { entry: this.entryOf(loc, obj), size: link.kind === 'url' ? undefined : link.size, stream };
    } finally {
      this.release(loc);
    }
  }

  async link(ctx: AccessContext, path: string): Promise<{ entry: Entry; link: Link; storage: StorageInfo }> {
    const { loc, obj, link } = await this.fileLink(ctx, path);
    this.release(loc);
    const lease = this.leaseOf(loc, link);
    return { entry: this.entryOf(loc, obj), link: { ...(link.kind === 'range' ? this.holding(loc, link) : link), lease }, storage: this.deps.mounts.info(loc.mount) };
  }

  /**
   * A range link whose streams hold the mount while they are open, as read's do: an Alias streams
   * its target's files through such links, and an edit of the target must not cut them.
   */
  private holding(loc: Located, link: Extract<Link, { kind: 'range' }>): Link {
    const mounts = this.deps.mounts;
    return {
      ...link,
      open: async (range, signal) => {
        if (!mounts.hold(loc.mount)) throw new VfsError('STORAGE_UNAVAILABLE', 'storage was replaced or removed', { path: loc.vpath });
        try {
          const stream = await link.open(range, signal);
          finished(stream, () => mounts.release(loc.mount));
          return stream;
        } catch (e) {
          mounts.release(loc.mount);
          throw e;
        }
      },
    };
  }

  async usage(ctx: AccessContext, path: string): Promise<{ total?: number; free?: number; used?: number }> {
    // The primary's space: that is where uploads go.
    const loc = await this.locateForRead(await this.enter(ctx, path), WRITE);
    try {
      // statvfs of a missing path: NOT_FOUND; of a virtual folder: nothing to tell.
      if (!loc || !(await this.objOrVirtual(loc, ctx))) return {};
      if (!loc.mount.capabilities.canUsage) return {};
      const d = this.tree.driver(loc.mount);
      return await this.tree.call(() => d.usage!(this.args(ctx)));
    } finally {
      this.release(loc);
    }
  }

  mkdir(ctx: AccessContext, path: string, opts?: MkdirOptions): Promise<Entry> {
    return this.track(this.writer.mkdir(ctx, path, opts));
  }

  moveTo(ctx: AccessContext, src: string, dst: string, opts?: TransferOptions): Promise<Entry> {
    return this.track(this.transfers.transfer('move', ctx, src, dst, opts));
  }

  copyTo(ctx: AccessContext, src: string, dst: string, opts?: TransferOptions): Promise<Entry> {
    return this.track(this.transfers.transfer('copy', ctx, src, dst, opts));
  }

  checkTransfer(kind: 'move' | 'copy', ctx: AccessContext, src: string, dst: string): Promise<void> {
    return this.track(this.transfers.checkTransfer(kind, ctx, src, dst));
  }

  remove(ctx: AccessContext, path: string, opts?: RemoveOptions): Promise<void> {
    return this.track(this.writer.remove(ctx, path, opts));
  }

  put(ctx: AccessContext, path: string, body: Readable, opts?: PutOptions): Promise<Entry> {
    return this.track(this.writer.put(ctx, path, body, opts));
  }

  setModified(ctx: AccessContext, path: string, modified: Date): Promise<void> {
    return this.track(this.writer.setModified(ctx, path, modified));
  }

  /** Write calls (put, mkdir, move, copy, remove, setModified) not settled yet. */
  get pendingWrites(): number {
    return this.writes;
  }

  /**
   * Resolves once no write call is under way (true), or after `timeoutMs` (false). A graceful stop
   * awaits it after the listeners cut their connections: a put cut off then fails, and its driver
   * removes what it had written (the Local driver's temp file) before the put settles, so nothing is
   * left behind when the process exits. Writes that start meanwhile are waited for too.
   */
  settled(timeoutMs: number): Promise<boolean> {
    if (this.writes === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.idle.delete(onIdle);
        resolve(ok);
      };
      const onIdle = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.idle.add(onIdle);
    });
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.writes++;
    const done = () => {
      if (--this.writes === 0) for (const f of [...this.idle]) f();
    };
    p.then(done, done);
    return p;
  }
}
