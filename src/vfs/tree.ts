/**
 * Object lookups inside one mount, shared by the read and write halves of the VFS: the driver call
 * wrapper (anything foreign becomes UPSTREAM), cached listings, lookups by driver path, `mkdir -p`,
 * cache invalidation after writes, and the storage's local sort.
 */
import { toVfsError, VfsError } from '../errors.js';
import { basename, isRootPath, join, parent } from '../paths.js';
import type { CallArgs, Driver, Obj } from '../../drivers/types.js';
import type { ListingCache } from './cache.js';
import type { Mount } from './mounts.js';
import type { Entry } from './types.js';

/** Natural order for names ("file2" before "file10"), as AList's order_by=name. */
const natural = new Intl.Collator(undefined, { numeric: true, sensitivity: 'variant' });

export function toEntry(o: Obj, vpath: string, name = o.name): Entry {
  const e: Entry = { name, size: o.isDir ? 0 : o.size, isDir: o.isDir, modified: o.modified, vpath };
  if (o.created) e.created = o.created;
  if (o.hashes) e.hashes = o.hashes;
  if (o.thumb) e.thumb = o.thumb;
  if (o.hasThumb) e.hasThumb = true;
  return e;
}

/**
 * How many missing folders one mkdir or upload creates on its way (`mkdir -p`). Each level costs
 * the driver a lookup and a create whose price grows with the depth (Local resolves the whole
 * path each time), so an unbounded chain let one request with a few-KB path occupy the server
 * for minutes. Far beyond what a client creates in one step (WebDAV and SFTP clients make one
 * folder per request).
 */
export const MAX_NEW_FOLDERS = 64;

export class Tree {
  /**
   * `group`: the ids of the storages serving `m`'s place in the tree (MountTable.groupIds). In a
   * `.balance` group writes go to the primary while reads take turns: a folder changed through one
   * member is stale in the others' cached listings too, which the next read may well be served from.
   */
  constructor(
    private readonly cache: ListingCache,
    private readonly group: (m: Mount) => readonly number[] = (m) => [m.id],
  ) {}

  driver(m: Mount): Driver {
    if (!m.driver) throw new VfsError('STORAGE_UNAVAILABLE', `storage not init: ${m.status}`);
    return m.driver;
  }

  /** Run a driver call; VfsErrors pass through, anything else is an UPSTREAM failure. */
  async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw toVfsError(e, 'UPSTREAM');
    }
  }

  rootObj(m: Mount, args: CallArgs): Promise<Obj> {
    const d = this.driver(m);
    if (d.get) return this.call(() => d.get!('/', args));
    return Promise.resolve({ name: '', path: '/', size: 0, isDir: true, modified: new Date(m.record.modified) });
  }

  /** A folder's children, through the listing cache, in the storage's configured order. */
  async list(m: Mount, dir: Obj, args: CallArgs, refresh = false): Promise<Obj[]> {
    if (!dir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
    const d = this.driver(m);
    const fetch = () => this.call(() => d.list(dir, refresh ? { ...args, refresh } : args));
    // A retired instance (still finishing operations) shares its id with its replacement, whose
    // cache must not receive what the old one lists. What it fetched before retiring is stored in
    // the per-mount cache that ListingCache.dropMount discarded then, so that cannot leak either.
    if (m.retired) return this.sorted(m, await fetch());
    const policy = { ttlMinutes: m.record.cache_expiration, noCache: m.definition?.config.no_cache ?? true };
    // A refresh is asked of the folder, not of the `.balance` member that happened to answer it.
    if (refresh) for (const id of this.group(m)) if (id !== m.id) this.cache.invalidate(id, dir.path);
    return this.sorted(m, await this.cache.list(m.id, dir.path, policy, fetch, refresh));
  }

  private sorted(m: Mount, objs: Obj[]): Obj[] {
    const { order_by: by, order_direction: dir, extract_folder: extract } = m.record;
    let out = objs;
    if (m.definition?.config.local_sort && by) {
      const cmp = (a: Obj, b: Obj) =>
        by === 'size' ? a.size - b.size : by === 'modified' ? a.modified.getTime() - b.modified.getTime() : natural.compare(a.name, b.name);
      out = [...out].sort((a, b) => (dir === 'desc' ? -cmp(a, b) : cmp(a, b)));
    }
    if (extract === 'front' || extract === 'back') {
      const dirs = out.filter((o) => o.isDir);
      const files = out.filter((o) => !o.isDir);
      out = extract === 'front' ? [...dirs, ...files] : [...files, ...dirs];
    }
    return out;
  }

  /** The object at a driver path: the driver's get when it has one, else a lookup in the parent. */
  async objAt(m: Mount, dpath: string, args: CallArgs): Promise<Obj> {
    if (isRootPath(dpath)) return this.rootObj(m, args);
    const d = this.driver(m);
    if (d.get) return this.call(() => d.get!(dpath, args));
    const dir = await this.objAt(m, parent(dpath), args);
    const name = basename(dpath);
    const hit = (await this.list(m, dir, args)).find((o) => o.name === name);
    if (!hit) throw new VfsError('NOT_FOUND', undefined, { path: dpath });
    return hit;
  }

  /** Like objAt, but undefined when the path (or a parent) does not exist. */
  async tryObjAt(m: Mount, dpath: string, args: CallArgs): Promise<Obj | undefined> {
    try {
      return await this.objAt(m, dpath, args);
    } catch (e) {
      if (e instanceof VfsError && e.code === 'NOT_FOUND') return undefined;
      throw e;
    }
  }

  /** The folder at `dpath`, creating it and any missing parents. A file in the way is EXISTS. */
  async ensureDir(m: Mount, dpath: string, args: CallArgs, budget = MAX_NEW_FOLDERS): Promise<Obj> {
    const found = await this.tryObjAt(m, dpath, args);
    if (found) {
      if (!found.isDir) throw new VfsError('EXISTS', 'file exists', { path: dpath });
      return found;
    }
    const d = this.driver(m);
    if (!d.mkdir) throw new VfsError('NOT_SUPPORTED', undefined, { path: dpath });
    if (budget <= 0) throw new VfsError('INVALID', `too many missing folders: at most ${MAX_NEW_FOLDERS} are created at once`, { path: dpath });
    const up = await this.ensureDir(m, parent(dpath), args, budget - 1);
    let made: Obj | void;
    try {
      made = await this.call(() => d.mkdir!(up, basename(dpath), args));
    } catch (e) {
      if (!(e instanceof VfsError && e.code === 'EXISTS')) throw e;
      made = undefined; // created concurrently by someone else: fine if it is a folder
    }
    this.changed(m, dpath);
    if (made) return made;
    const again = await this.objAt(m, dpath, args);
    if (!again.isDir) throw new VfsError('EXISTS', 'file exists', { path: dpath });
    return again;
  }

  /** After a change at `dpath`: its folder's listing is stale; with `tree`, so is all below it. */
  changed(m: Mount, dpath: string, tree = false): void {
    for (const id of this.group(m)) {
      this.cache.invalidate(id, parent(dpath));
      if (tree) this.cache.invalidateTree(id, dpath);
    }
  }

  /** Child path helper that tolerates only names a virtual path can carry. */
  childPath(dirVpath: string, name: string): string | undefined {
    try {
      return join(dirVpath, name);
    } catch {
      return undefined;
    }
  }
}
