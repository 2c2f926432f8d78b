/**
 * Change notifications of the VFS, for services that mirror the tree (the search index, and any
 * later cache or audit log). Protocol-neutral and consumer-neutral: the VFS emits *what changed*,
 * in absolute virtual paths (base path included), after the operation succeeded.
 *
 * - `put`, `mkdir`: the entry now at `vpath` (missing parent folders may have been created too);
 * - `remove`: `vpath` and everything below it are gone;
 * - `move`, `copy`: `vpath` (and its subtree) now also/instead lives at `to`; `entry` is the target;
 * - `listed`: a folder was listed and these are *all* its children as the storage reports them
 *   (before hide rules, mount points included), so a mirror can refresh what it knows;
 * - `unmounted`: the storage at `vpath` was deleted or moved to another mount path: its entries are
 *   gone from `vpath`, except what lies under the other storages' mount paths `mounts` (a storage
 *   may be mounted inside another's path). A moved storage's entries are not announced at its new
 *   path (nothing has listed them yet).
 * - `mounted`: a storage now serves `vpath` (created, or moved there): whatever another storage's
 *   folder held at `vpath` is no longer served below it, except under the other mount paths `mounts`.
 *   The new storage's entries are not announced (nothing has listed them yet).
 *   For `unmounted`, `mounted` and `remounted`, `vpath` and `mounts` are tree paths (a `.balance`
 *   member sits at its group's path); a member leaving or joining a group that still serves the
 *   place announces nothing.
 * - `remounted`: the storage at `vpath` was edited in place (its options or disable_index changed):
 *   it may serve other entries there now (another root folder, bucket or alias target), or the same
 *   ones (or its entries are no longer indexed). Mounts inside are `mounts`, as above. Not
 *   announced as `mounted`: that drops what is kept for the entries served there (WebDAV's dead
 *   properties), lost to a change of an unrelated option.
 *
 * Listeners run synchronously inside the VFS call and must be cheap and must not throw (a throwing
 * listener is isolated so that it can never fail the operation that emitted the event).
 */
import type { Entry } from './types.js';

export type VfsChange =
  | { kind: 'put' | 'mkdir'; vpath: string; entry: Entry }
  | { kind: 'remove'; vpath: string }
  | { kind: 'move' | 'copy'; vpath: string; to: string; entry: Entry }
  | { kind: 'listed'; vpath: string; entries: readonly Entry[] }
  | { kind: 'unmounted' | 'mounted' | 'remounted'; vpath: string; mounts: readonly string[] };

export type VfsChangeListener = (change: VfsChange) => void;

export class ChangeFeed {
  private readonly listeners = new Set<VfsChangeListener>();

  /** Subscribe; returns the unsubscribe function. */
  on(listener: VfsChangeListener): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** True when someone listens (lets the VFS skip building events nobody reads). */
  get active(): boolean {
    return this.listeners.size > 0;
  }

  emit(change: VfsChange): void {
    for (const l of this.listeners) {
      try {
        l(change);
      } catch {
        // A mirror's failure is its own business; the file operation already succeeded.
      }
    }
  }
}
