/**
 * Mapping driver paths to host paths without ever leaving the root. A driver path is split into
 * validated segments (src/paths.ts refuses `..`, `\` and NUL), joined under the root, and then the
 * real location is checked: the realpath of the path, or of its nearest existing ancestor when it
 * does not exist yet, must lie inside the root's realpath. A symlink pointing outside the root is
 * therefore refused for reading and writing alike.
 *
 * realpath runs synchronously (realpath(3), as fs.promises.realpath uses): on a local disk it costs
 * microseconds, while the promise form is a thread-pool round trip, and every driver call resolves
 * at least one path.
 */
import { lstatSync, realpathSync, type Stats } from 'node:fs';
import * as nodePath from 'node:path';
import { VfsError } from '../../src/errors.js';
import { segments } from '../../src/paths.js';

export class HostPaths {
  /**
   * Real paths of folders (lexical host path → real path) found in the current turn of the event
   * loop. One VFS operation looks at the same folders several times within one turn (an upload: its
   * folder, the target in it, then the driver's own checks), and each realpath costs a readlink per
   * path component. The memo is emptied before the next turn, so it never outlives the operation
   * that filled it: a link swapped in afterwards is seen by the next one.
   */
  private readonly turn = new Map<string, string>();

  /** `root` must be absolute; `realRoot` its realpath (set by the driver's init). */
  constructor(readonly root: string, private readonly realRoot: string) {}

  private remember(host: string, real: string): void {
    if (this.turn.size === 0) setImmediate(() => this.turn.clear()); // the first entry of this turn
    this.turn.set(host, real);
  }

  private dirRealpath(dir: string): string {
    // The root's realpath was taken at init and is what `inside` checks against: resolving it again
    // cost a readlink per component of the root's own path on every entry directly under it.
    if (dir === this.root) return this.realRoot;
    let real = this.turn.get(dir);
    if (real === undefined) this.remember(dir, (real = realpathSync.native(dir)));
    return real;
  }

  /** The lexical host path of a driver path (no file system access, no symlink check). */
  lexical(dpath: string): string {
    return nodePath.join(this.root, ...segments(dpath));
  }

  inside(real: string): boolean {
    if (real === this.realRoot) return true;
    const prefix = this.realRoot.endsWith(nodePath.sep) ? this.realRoot : this.realRoot + nodePath.sep;
    return real.startsWith(prefix);
  }

  /**
   * The host path of a driver path after proving that its real location is inside the root.
   * Returns the lexical path (so lstat/rename act on the entry itself) and the resolved one.
   */
  async resolve(dpath: string): Promise<{ host: string; real: string }> {
    return this.resolveSync(dpath);
  }

  /** resolve() without the promise, for callers that chain several synchronous checks. */
  resolveSync(dpath: string): { host: string; real: string } {
    const host = this.lexical(dpath);
    return { host, real: this.realOf(host, dpath) };
  }

  /** The checked real path of the lexical host path `host` (of driver path `dpath`, for errors). */
  realOf(host: string, dpath: string): string {
    return this.realWithStats(host, dpath).real;
  }

  /**
   * resolveSync plus what is at the real path when that came for free: `stats` of the entry (not a
   * link, so they are its stat), undefined when nothing is there, null when not looked at (links,
   * the root, the walk). Lookups use it to skip a second stat. `memo: false` when nothing will be
   * looked up inside a folder found there within this turn (an upload joins its target's name to
   * the real path itself): remembering it cost a setImmediate, and so one more turn of the event
   * loop (an epoll_wait and the immediate queue), per small PUT.
   */
  resolveWithStats(dpath: string, memo = true): { host: string; real: string; stats: Stats | undefined | null } {
    const host = this.lexical(dpath);
    const { real, stats } = this.realWithStats(host, dpath, memo);
    return { host, real, stats };
  }

  private realWithStats(host: string, dpath: string, memo = true): { real: string; stats: Stats | undefined | null } {
    if (host === this.root) return { real: this.realRoot, stats: null };
    // Usually the folder exists and the last component is a plain entry or missing (an upload's
    // target): then the real path is the folder's realpath plus the name, found without an ENOENT
    // exception. Anything else (a link, a missing folder, a file in the way) takes the full walk.
    try {
      const dirReal = this.dirRealpath(nodePath.dirname(host));
      if (this.inside(dirReal)) {
        const real = nodePath.join(dirReal, nodePath.basename(host));
        const stats = lstatSync(real, { throwIfNoEntry: false });
        // A folder that is not a link: its real path is known now, for lookups inside it.
        if (memo && stats?.isDirectory()) this.remember(host, real);
        if (!stats?.isSymbolicLink()) return { real, stats };
      }
    } catch {
      // fall through to the walk, which reports what is wrong
    }
    return { real: this.walk(host, dpath), stats: null };
  }

  /**
   * realpath of `host`, or of its nearest existing ancestor plus the missing rest; checked. The
   * ancestor is found by bisection: a prefix of the path resolves exactly when every component in
   * it does, so O(log depth) realpath calls, not one per missing level (each parsing the whole
   * path). Creating an N-level folder chain asks this once per level, so probing level by level
   * made N^2/2 synchronous realpath calls: a 2,000-level upload path blocked the event loop for
   * minutes.
   */
  private walk(host: string, dpath: string): string {
    const parts = nodePath.relative(this.root, host).split(nodePath.sep).filter((s) => s !== '');
    const realOfPrefix = (n: number): string | undefined => {
      try {
        return realpathSync.native(nodePath.join(this.root, ...parts.slice(0, n)));
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code !== 'ENOENT' && code !== 'ENOTDIR') throw e;
        return undefined;
      }
    };
    let real = realOfPrefix(parts.length);
    if (real === undefined) {
      // Invariant: prefix `hi` does not resolve; prefix `lo` does (lo = -1: none found yet).
      let lo = -1;
      let hi = parts.length;
      let loReal: string | undefined;
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        const r = realOfPrefix(mid);
        if (r === undefined) hi = mid;
        else [lo, loReal] = [mid, r];
      }
      if (loReal === undefined) throw new VfsError('NOT_FOUND', undefined, { path: dpath });
      real = nodePath.join(loReal, ...parts.slice(lo));
    }
    if (!this.inside(real)) throw new VfsError('FORBIDDEN', 'path leaves the storage root', { path: dpath });
    return real;
  }
}
