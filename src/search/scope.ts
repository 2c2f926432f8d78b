/**
 * What belongs in the index (alist-compat §5, §8): nothing below an `ignore_paths` line, nothing
 * served by a storage with `disable_index`, nothing deeper than `max_index_depth` (a top-level
 * entry has depth 1). Also the internal principal the index walks the tree with: it sees hidden
 * entries and passes path passwords, because filtering happens at query time for each caller.
 */
import { PERM, ROLE, type AccessContext, type Principal } from '../auth/principal.js';
import { basename, isWithin, normalize, parent, segments } from '../paths.js';
import type { Settings } from '../settings/settings.js';
import { STATUS_DISABLED, type Mount, type MountTable } from '../vfs/mounts.js';
import type { Entry } from '../vfs/types.js';
import type { IndexRow } from './store.js';

const INDEXER: Principal = {
  userId: 0, username: 'indexer', role: ROLE.ADMIN, basePath: '/', permission: PERM.SEE_HIDDEN | PERM.NO_PASSWORD,
  disabled: false, otp: false, pwdTs: 0,
};

export function indexerContext(signal?: AbortSignal): AccessContext {
  return { principal: INDEXER, protocol: 'internal', ip: '', signal };
}

export function rowOf(e: Entry): IndexRow {
  return { parent: parent(e.vpath), name: basename(e.vpath), isDir: e.isDir, size: e.isDir ? 0 : e.size };
}

export interface AcceptOptions {
  /** Ignored paths to use instead of reading `ignore_paths` again (hot loops pass them once). */
  ignore?: readonly string[];
  /** false: the caller limits depth itself (a build job counts from where it started). */
  depth?: boolean;
}

export class IndexScope {
  constructor(private readonly settings: Settings, private readonly mounts: MountTable) {}

  /** `max_index_depth`; zero or negative means unlimited. */
  maxDepth(): number {
    const n = this.settings.number('max_index_depth');
    return Number.isFinite(n) && n > 0 ? Math.floor(n) : Infinity;
  }

  ignorePaths(): string[] {
    const out: string[] = [];
    for (const line of this.settings.get('ignore_paths').split('\n')) {
      const t = line.trim();
      if (!t) continue;
      try {
        out.push(normalize(t));
      } catch {
        // a line with `..` can name nothing in the tree
      }
    }
    return out;
  }

  /**
   * Where every storage sits in the tree now (Mount.vpath: a `.balance` member's mount path is no
   * place in the tree, its rows are at its group's path).
   */
  mountPaths(): string[] {
    return this.mounts.all().map((m) => m.vpath);
  }

  /**
   * Tree paths of the disabled storages: listings leave them out, but their rows stay in the index
   * (service.ts answers none of them while disabled; enabling brings them back at once). A `.balance`
   * group's path only once all its members are disabled: until then another member serves it.
   */
  offlinePaths(): string[] {
    const all = this.mounts.all();
    const off = (m: Mount) => m.record.disabled || m.status === STATUS_DISABLED;
    const paths = new Set(all.filter(off).map((m) => m.vpath));
    for (const m of all) if (!off(m)) paths.delete(m.vpath);
    return [...paths];
  }

  /** Does a storage's content go into the index (also decides which storages are watched). */
  storageIndexed(m: Mount): boolean {
    return !m.record.disable_index;
  }

  /** The storage owning `vpath` (longest tree path on whole segments), if any. */
  private owner(vpath: string): Mount | undefined {
    let best: Mount | undefined;
    for (const m of this.mounts.all()) {
      if (isWithin(m.vpath, vpath) && (!best || m.segments.length > best.segments.length)) best = m;
    }
    return best;
  }

  /**
   * accepts(child, { ignore, depth: false }) for the children of `dir`, worked out once per folder:
   * the build job asks it for every entry it lists, and parsing every child's path again was a
   * visible share of a build. A child is refused below an ignored path (the child itself or an
   * ancestor) or when its storage is not indexed — the storage mounted exactly at the child if any
   * (it is the longest mount holding the child), else the one owning `dir`.
   */
  childFilter(dir: string, ignore: readonly string[]): (name: string) => boolean {
    if (ignore.some((ig) => isWithin(ig, dir))) return () => false;
    const depth = segments(dir).length;
    const apart = new Map<string, boolean>(); // children decided apart from the rest
    for (const ig of ignore) {
      const s = segments(ig);
      if (s.length === depth + 1 && isWithin(dir, ig)) apart.set(s[depth]!, false);
    }
    for (const m of this.mounts.all()) {
      const name = m.segments[depth];
      if (m.segments.length === depth + 1 && !apart.has(name!) && isWithin(dir, m.vpath)) apart.set(name!, this.storageIndexed(m));
    }
    const owner = this.owner(dir);
    const rest = !owner || this.storageIndexed(owner);
    return (name) => apart.get(name) ?? rest;
  }

  accepts(vpath: string, opts: AcceptOptions = {}): boolean {
    const depth = segments(vpath).length;
    if (depth === 0) return false;
    if (opts.depth !== false && depth > this.maxDepth()) return false;
    for (const ig of opts.ignore ?? this.ignorePaths()) if (isWithin(ig, vpath)) return false;
    const m = this.owner(vpath);
    return !m || this.storageIndexed(m);
  }
}
