import { AsyncLocalStorage } from 'node:async_hooks';
import type { Readable } from 'node:stream';
import { isVfsError, STORAGE_DISABLED_MESSAGE, VfsError } from '../../src/errors.js';
import { basename, isWithin, join, parent, segments, validateName } from '../../src/paths.js';
import type { CallArgs, Driver, DriverContext, Link, ListArgs, Obj, PutArgs, RemoveArgs, ThumbArgs, TreeAccess } from '../types.js';
import type { AliasOptions } from './index.js';
import { parseTargets, resolve, type Targets } from './targets.js';

/**
 * Calls of one alias a call chain may pass through (see AliasDriver.via). Two: an alias may be met
 * again once on the way; more only shows again what an alias holding itself showed (and every copy
 * went into the search index), and each one multiplies a loop's work.
 */
const MAX_ENTRIES = 2;

const virtualDir = (path: string): Obj => ({ name: basename(path), path, size: 0, isDir: true, modified: new Date(0) });

/**
 * A target gave no answer: its backend failed, or its storage failed to init (its remote was down
 * then). Not a target the admin disabled (left out) or one without the path.
 */
const unanswered = (e: unknown): boolean =>
  isVfsError(e, 'UPSTREAM') || isVfsError(e, 'INTERNAL') || (isVfsError(e, 'STORAGE_UNAVAILABLE') && e.message !== STORAGE_DISABLED_MESSAGE);

/** A tree Obj re-addressed to this alias's driver path. */
const rebase = (o: Obj, path: string): Obj => ({ ...o, id: undefined, name: basename(path), path });

export class AliasDriver implements Driver {
  protected readonly targets: Targets;
  /**
   * How many of this alias's calls into the tree are under way on this call chain. Re-entry is not
   * always a loop (an alias of `/` showing an alias that shows a folder through it ends), so only
   * a chain passing through it MAX_ENTRIES times is one.
   */
  private readonly inside = new AsyncLocalStorage<number>();

  constructor(protected readonly opts: AliasOptions, protected readonly ctx: DriverContext) {
    this.targets = parseTargets(opts.paths);
  }

  protected get tree(): TreeAccess {
    if (!this.ctx.tree) throw new VfsError('STORAGE_UNAVAILABLE', 'alias needs access to the virtual tree, which this server does not provide');
    return this.ctx.tree;
  }

  /**
   * Run a tree call; refuse one that re-enters too often, which means the alias's targets lead back
   * into itself. (Any re-entry was refused: listing `/all/fav`, with `/all` an alias of `/` and
   * `/fav` one of `/all/la/docs`, failed while `/fav` itself listed.)
   */
  protected via<T>(fn: () => Promise<T>): Promise<T> {
    const depth = this.inside.getStore() ?? 0;
    if (depth >= MAX_ENTRIES) return Promise.reject(new VfsError('INVALID', 'alias paths lead back into the alias itself'));
    return this.inside.run(depth + 1, fn);
  }

  async init(): Promise<void> {
    void this.tree; // fails init when the server gives no tree
  }

  async drop(): Promise<void> {}

  /**
   * Every existing target of a driver path, in `paths` order, with its tree object. `strict`: a
   * target that gave no answer (see unanswered) fails the call, as in list: it may hold the name.
   */
  protected async found(path: string, args: CallArgs, strict = false): Promise<Array<{ real: string; obj: Obj }>> {
    const r = resolve(this.targets, path);
    if (r.root) return [];
    const out: Array<{ real: string; obj: Obj }> = [];
    let firstError: unknown;
    for (const real of r.candidates) {
      try {
        out.push({ real, obj: await this.tree.stat(real, args) });
      } catch (e) {
        if (strict && unanswered(e)) throw e;
        if (!isVfsError(e, 'NOT_FOUND')) firstError ??= e;
      }
    }
    if (!out.length && firstError) throw firstError;
    return out;
  }

  /**
   * Driver.treePath: the first target that exists; a path not there yet is where a write puts it,
   * in the first target holding its nearest existing folder. (The first candidate was the answer:
   * with that folder only in a later target, a folder copied into its own subfolder through the
   * alias was not seen as one, and was copied into itself without end.)
   */
  treePath(path: string, args: CallArgs): Promise<string | undefined> {
    return this.via(async () => {
      const s = segments(path);
      const r = resolve(this.targets, '/' + s.join('/'));
      if (r.root) return undefined;
      for (let n = s.length; n >= 0; n--) {
        const at = '/' + s.slice(0, n).join('/');
        if (resolve(this.targets, at).root) break;
        const [hit] = await this.found(at, args);
        if (hit) return join(hit.real, ...s.slice(n));
      }
      return r.candidates[0];
    });
  }

  get(path: string, args: CallArgs): Promise<Obj> {
    return this.via(async () => {
      const p = '/' + segments(path).join('/');
      if (resolve(this.targets, p).root) return virtualDir('/');
      const [hit] = await this.found(p, args);
      if (!hit) throw new VfsError('NOT_FOUND', undefined, { path: p });
      return rebase(hit.obj, p);
    });
  }

  list(dir: Obj, args: ListArgs): Promise<Obj[]> {
    return this.via(async () => {
      if (!dir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
      const r = resolve(this.targets, dir.path);
      if (r.root) return [...this.targets.keys()].map((n) => virtualDir('/' + n));
      const byName = new Map<string, Obj>();
      let listed = false;
      let firstError: unknown;
      for (const real of r.candidates) {
        try {
          // Merged folders: the first target holding a name wins, as get() and link() see it.
          for (const o of await this.tree.list(real, args)) if (!byName.has(o.name)) byName.set(o.name, rebase(o, join(dir.path, o.name)));
          listed = true;
        } catch (e) {
          // A target whose backend failed (its remote is down) gave no answer: listing the others
          // alone made its files vanish, and a sync client then deleted its copies of them. So does
          // one whose init failed (the remote was down at startup). A disabled target is the
          // admin's choice and stays left out.
          if (unanswered(e)) throw e;
          if (!isVfsError(e, 'NOT_FOUND')) firstError ??= e;
        }
      }
      if (!listed) throw firstError ?? new VfsError('NOT_FOUND', undefined, { path: dir.path });
      return [...byName.values()];
    });
  }

  /** The tree path of the file a file's link or thumbnail comes from: the first target holding it. */
  private async fileTarget(file: Obj, args: CallArgs): Promise<string> {
    if (file.isDir) throw new VfsError('IS_A_DIR', undefined, { path: file.path });
    const hit = (await this.found(file.path, args)).find((h) => !h.obj.isDir);
    if (!hit) throw new VfsError('NOT_FOUND', undefined, { path: file.path });
    return hit.real;
  }

  link(file: Obj, args: CallArgs): Promise<Link> {
    return this.via(async () => this.tree.link(await this.fileTarget(file, args), args));
  }

  /**
   * The target's thumbnail (listings offer one where the target's do: hasThumb is kept), asked of
   * the tree so the target's rules hold. Its URL stays on the alias's path, signed for it; AList's
   * alias gave the target's own thumb URL, which told the client the target's path.
   */
  thumbnail(file: Obj, args: ThumbArgs): Promise<Link | undefined> {
    return this.via(async () => this.tree.thumbnail(await this.fileTarget(file, args), args));
  }
}

/** An alias with `writable` on: writes go to the target that holds the object (or its folder). */
export class WritableAliasDriver extends AliasDriver {
  /**
   * The one tree path a write on `path` applies to. With several names, a top-level name stands for
   * its target folders themselves: only writes into it or its mtime (`topOk`) are allowed, as with
   * AList's getReqPath (isParent); a remove, rename or move of it removed, renamed or moved the target.
   */
  private async single(path: string, args: CallArgs, topOk = false): Promise<string> {
    if (resolve(this.targets, path).root) throw new VfsError('NOT_SUPPORTED', 'the alias root is virtual');
    const fixed = topOk ? undefined : this.unmovable(path);
    if (fixed) throw new VfsError('NOT_SUPPORTED', fixed.reason, { path });
    // Protected, a target that did not answer may hold the name too: it was not seen, and the copy in
    // the other target was the one removed or renamed.
    const hits = await this.found(path, args, this.opts.protect_same_name);
    if (!hits.length) throw new VfsError('NOT_FOUND', undefined, { path });
    if (hits.length > 1 && this.opts.protect_same_name) throw new VfsError('FORBIDDEN', 'same-name files cannot be Rename/Delete', { path });
    return hits[0]!.real;
  }

  /** Driver.unmovable: with several names, a top-level one is its target folders themselves (see single). */
  unmovable(path: string): { reason: string } | undefined {
    return this.targets.size > 1 && segments(path).length === 1 ? { reason: 'an alias target itself cannot be changed' } : undefined;
  }

  /** The tree folder a new entry named `name` in `dir` goes to; EXISTS when the name is taken. */
  private async newEntry(dir: Obj, name: string, args: CallArgs): Promise<string> {
    if (!dir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
    validateName(name);
    const target = join(await this.single(dir.path, args, true), name);
    return target;
  }

  mkdir(parentDir: Obj, name: string, args: CallArgs): Promise<Obj> {
    return this.via(async () => {
      const target = await this.newEntry(parentDir, name, args);
      if ((await this.found(join(parentDir.path, name), args)).length) throw new VfsError('EXISTS', undefined, { path: join(parentDir.path, name) });
      return rebase(await this.tree.mkdir(target, args), join(parentDir.path, name));
    });
  }

  put(dstDir: Obj, stream: Readable, args: PutArgs): Promise<Obj> {
    return this.via(async () => {
      const target = await this.newEntry(dstDir, args.name, args);
      const existing = await this.found(join(dstDir.path, args.name), args);
      if (existing.some((h) => h.obj.isDir)) throw new VfsError('IS_A_DIR', undefined, { path: join(dstDir.path, args.name) });
      const { name: _name, ...rest } = args;
      return rebase(await this.tree.put(target, stream, rest), join(dstDir.path, args.name));
    });
  }

  rename(obj: Obj, newName: string, args: CallArgs): Promise<Obj> {
    return this.via(async () => {
      const real = await this.single(obj.path, args);
      const dst = join(parent(obj.path), validateName(newName));
      return rebase(await this.tree.moveTo(real, join(parent(real), newName), args), dst);
    });
  }

  private transfer(kind: 'move' | 'copy', obj: Obj, dstDir: Obj, args: CallArgs): Promise<Obj> {
    return this.via(async () => {
      if (obj.isDir && isWithin(obj.path, join(dstDir.path, obj.name))) {
        throw new VfsError('INVALID', 'the destination folder is a subfolder of the source folder');
      }
      const real = kind === 'move' ? await this.single(obj.path, args) : (await this.found(obj.path, args))[0]?.real;
      if (!real) throw new VfsError('NOT_FOUND', undefined, { path: obj.path });
      const target = await this.newEntry(dstDir, obj.name, args);
      const moved = kind === 'move' ? await this.tree.moveTo(real, target, args) : await this.tree.copyTo(real, target, args);
      return rebase(moved, join(dstDir.path, obj.name));
    });
  }

  move(obj: Obj, dstDir: Obj, args: CallArgs): Promise<Obj> {
    return this.transfer('move', obj, dstDir, args);
  }

  copy(obj: Obj, dstDir: Obj, args: CallArgs): Promise<Obj> {
    return this.transfer('copy', obj, dstDir, args);
  }

  remove(obj: Obj, args: RemoveArgs): Promise<void> {
    return this.via(async () => this.tree.remove(await this.single(obj.path, args), args));
  }

  setModified(obj: Obj, modified: Date, args: CallArgs): Promise<void> {
    return this.via(async () => this.tree.setModified(await this.single(obj.path, args, true), modified, args));
  }
}
