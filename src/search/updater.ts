/**
 * Keeps the index current between builds:
 * - every write through the VFS (put, mkdir, move, copy, remove) is applied at once;
 * - with `auto_update_index`, a folder listing replaces what the index knows about that folder's
 *   children (skipped while a build job runs: the job is listing everything anyway);
 * - changes made outside treegate, reported by storages that can watch (Local), are collected for
 *   a moment and then looked up through the VFS: present → indexed, gone → removed with subtree.
 */
import type { Logger } from 'pino';
import { isVfsError } from '../errors.js';
import { isWithin, parent, segments } from '../paths.js';
import type { Settings } from '../settings/settings.js';
import type { VfsChange } from '../vfs/events.js';
import type { Vfs } from '../vfs/vfs.js';
import type { IndexBuilder } from './builder.js';
import { indexerContext, rowOf, type IndexScope } from './scope.js';
import type { IndexStore } from './store.js';

/** How long outside changes are collected before they are looked up (bursts collapse into one pass). */
export const OUTSIDE_DEBOUNCE_MS = 250;

export class IndexUpdater {
  private readonly pending = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly store: IndexStore,
    private readonly scope: IndexScope,
    private readonly builder: IndexBuilder,
    private readonly settings: Settings,
    private readonly vfs: Vfs,
    private readonly log: Logger,
  ) {}

  onVfsChange(c: VfsChange): void {
    if (this.closed) return;
    // Every listing is reported, the build job's own too: decide before taking the write lock.
    if (c.kind === 'listed' && (!this.settings.bool('auto_update_index') || this.builder.running)) return;
    try {
      // One transaction per change (ensureFolders + upsert would otherwise be two commits).
      this.store.tx(() => this.apply(c));
    } catch (err) {
      this.log.warn({ err, change: c.kind, path: c.vpath }, 'search index update failed');
    }
    if ((c.kind === 'move' || c.kind === 'copy') && c.entry.isDir) this.listArrival(c.vpath, c.to);
    if (c.kind === 'remounted') this.relist(c.vpath);
  }

  /**
   * A storage edited in place had its rows dropped (they may be another root folder's): what it
   * serves now is listed by an update job (a job running already does so when it ends: noteMounted).
   */
  private relist(vpath: string): void {
    const { scope, builder } = this;
    if (builder.running || !scope.accepts(vpath)) return;
    const max = scope.maxDepth();
    const levels = Number.isFinite(max) ? max - segments(vpath).length : -1;
    if (levels === 0) return;
    try {
      builder.start({ kind: 'update', paths: [vpath], maxDepth: levels, ignore: [] });
    } catch (err) {
      this.log.warn({ err, path: vpath }, 'search index: edited storage not listed');
    }
  }

  /**
   * A folder moved or copied brings along the rows of its content only as far as the index held them
   * at the source: nothing from below an ignored path, a storage with disable_index or past
   * max_index_depth. Where the target may hold more, it is listed by an update job (a job running
   * already does so when it ends, see IndexBuilder.noteArrived).
   */
  private listArrival(from: string, to: string): void {
    const { scope, builder } = this;
    if (builder.running || !scope.accepts(to)) return;
    const max = scope.maxDepth();
    const cut = scope.ignorePaths().some((ig) => isWithin(from, ig));
    const shallower = Number.isFinite(max) && segments(to).length < segments(from).length;
    if (!cut && !shallower && scope.accepts(from)) return;
    const levels = Number.isFinite(max) ? max - segments(to).length : -1;
    if (levels === 0) return;
    try {
      builder.start({ kind: 'update', paths: [to], maxDepth: levels, ignore: [] });
    } catch (err) {
      this.log.warn({ err, path: to }, 'search index: moved folder not listed');
    }
  }

  private apply(c: VfsChange): void {
    const { store, scope } = this;
    switch (c.kind) {
      case 'put':
      case 'mkdir':
        if (!scope.accepts(c.vpath)) return;
        store.ensureFolders(c.vpath);
        store.upsert([rowOf(c.entry)]);
        return;
      case 'remove':
        store.removeTree(c.vpath);
        this.builder.noteRemoved(c.vpath);
        return;
      case 'move':
      case 'copy':
        if (c.kind === 'move') this.builder.noteRemoved(c.vpath);
        if (c.entry.isDir) this.builder.noteArrived(c.to);
        if (!scope.accepts(c.to)) {
          if (c.kind === 'move') store.removeTree(c.vpath);
          return;
        }
        store.ensureFolders(c.to);
        if (c.kind === 'move') store.moveTree(c.vpath, c.to, rowOf(c.entry));
        else store.copyTree(c.vpath, c.to, rowOf(c.entry));
        // The rows came along from the source, where other scope rules held: what now lies below an
        // ignored path or too deep would never have been indexed here, so it goes.
        for (const ig of scope.ignorePaths()) if (isWithin(c.to, ig)) store.removeTree(ig);
        if (Number.isFinite(scope.maxDepth())) store.removeDeeperThan(c.to, scope.maxDepth());
        return;
      case 'unmounted':
        store.removeTreeExcept(c.vpath, c.mounts);
        this.builder.noteUnmounted(c.vpath);
        // Folders above that lie in another storage's path (the one at `/` holds them all) stay, as
        // they may be its real folders: looked up, as outside changes are, since a folder that only
        // led to this storage is gone now and was still found.
        for (let p = parent(c.vpath); segments(p).length > 0; p = parent(p)) this.onOutsideChange(p);
        return;
      case 'mounted':
      case 'remounted':
        // Rows of the folder the new storage now covers would answer paths it does not serve (its
        // own content is indexed when listed); the row of the folder itself stays.
        store.removeBelowExcept(c.vpath, c.mounts);
        this.builder.noteMounted(c.vpath);
        return;
      case 'listed': {
        if (segments(c.vpath).length > 0 && !scope.accepts(c.vpath)) return;
        const ignore = scope.ignorePaths();
        store.replaceChildren(c.vpath, c.entries.filter((e) => scope.accepts(e.vpath, { ignore })).map(rowOf), scope.offlinePaths());
        return;
      }
    }
  }

  /** A storage reported an outside change at `vpath`. */
  onOutsideChange(vpath: string): void {
    if (this.closed) return;
    this.pending.add(vpath);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, OUTSIDE_DEBOUNCE_MS);
  }

  /** Look up every pending path (one pass at a time; changes arriving meanwhile wait for the next). */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.closed || this.pending.size === 0) return;
    const paths = [...this.pending].sort(); // parents before children
    this.pending.clear();
    this.flushing = (async () => {
      for (const vpath of paths) {
        if (this.closed) return;
        await this.refresh(vpath);
      }
    })().finally(() => (this.flushing = undefined));
    await this.flushing;
  }

  private async refresh(vpath: string): Promise<void> {
    try {
      const entry = await this.vfs.stat(indexerContext(), vpath);
      if (this.closed || !this.scope.accepts(vpath)) return;
      this.store.tx(() => {
        this.store.ensureFolders(vpath);
        // A folder replaced by a file (moved off the storage, a file made under its name): its old
        // content was reported by nobody, and stayed findable below the file.
        if (!entry.isDir) this.store.removeBelowExcept(vpath, this.scope.mountPaths());
        this.store.upsert([rowOf(entry)]);
      });
    } catch (err) {
      if (this.closed) return;
      if (isVfsError(err, 'NOT_FOUND') || isVfsError(err, 'NOT_A_DIR')) {
        this.store.removeTree(vpath);
        // A running build may have listed it before it went (see IndexBuilder.replayRemovals).
        this.builder.noteRemoved(vpath);
      } else this.log.debug({ err, path: vpath }, 'search index: outside change not applied');
    }
  }

  /** Drop pending work and wait for a pass in progress. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.pending.clear();
    await this.flushing;
  }
}
