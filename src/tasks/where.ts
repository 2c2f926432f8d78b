/**
 * `[<mount path>](<path inside the storage>)`: how AList names the two ends of a task. Computed
 * through the VFS (storageOf) so tasks never look at mounts or drivers themselves.
 */
import type { AccessContext } from '../auth/principal.js';
import { isVfsError, STORAGE_DISABLED_MESSAGE } from '../errors.js';
import { join, relativeTo } from '../paths.js';
import type { VfsApi } from '../vfs/types.js';
import { FatalTaskError } from './failures.js';

export interface Where {
  mount: string;
  inside: string;
}

export async function whereOf(vfs: VfsApi, ctx: AccessContext, userPath: string): Promise<Where> {
  const base = ctx.principal.basePath;
  const abs = join(base, userPath);
  const storage = await vfs.storageOf(ctx, userPath).catch(() => undefined);
  const mount = storage?.mountPath ?? '/';
  const inside = relativeTo(mount, abs) ?? abs;
  // Task names are shown to their creator, who sees the tree from their base path: a mount above it
  // (shared with other users) is their `/`, one below it is named relative to it.
  if (relativeTo(base, mount) === undefined) return { mount: '/', inside: relativeTo(base, abs) ?? '/' };
  return { mount: shownMount(ctx, mount), inside };
}

/** A mount path as `ctx`'s user sees it: relative to their base path (`/` for one at or above it). */
export function shownMount(ctx: AccessContext, mount: string): string {
  return relativeTo(ctx.principal.basePath, mount) ?? '/';
}

export const fmtWhere = (w: Where) => `[${w.mount}](${w.inside})`;

/** The storage a task's path resolved to when the task was made (kept in its args). */
export interface StoragePin {
  id: number;
  mount: string;
}

export function storagePin(v: unknown): StoragePin | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const { id, mount } = v as Record<string, unknown>;
  return typeof id === 'number' && typeof mount === 'string' ? { id, mount } : undefined;
}

/**
 * The storage `userPath` resolves to now (undefined above all mounts). With `pin` (what it resolved
 * to when the task was made): throws a FatalTaskError when it now resolves to another storage or
 * none, i.e. the pinned one was deleted, disabled or remounted, so the task never writes into
 * whatever storage serves the path now (e.g. the root storage).
 */
export async function pinStorage(vfs: VfsApi, ctx: AccessContext, userPath: string, pin: StoragePin | undefined, end: string): Promise<StoragePin | undefined> {
  // With a pin, a path nothing serves now (NOT_FOUND: no storage at `/` either) is the pinned storage
  // gone too: the task failed `object not found` after its retries, not naming the storage. So is a
  // path whose storage the admin disabled (it stays in the table, refusing): the task failed with
  // `storage not init: disabled` and was retried for nothing.
  const gone = (e: unknown) => isVfsError(e, 'NOT_FOUND') || (isVfsError(e, 'STORAGE_UNAVAILABLE') && e.message === STORAGE_DISABLED_MESSAGE);
  const s = await vfs.storageOf(ctx, userPath).catch((e: unknown) => (pin && gone(e) ? undefined : Promise.reject(e)));
  if (pin && (!s || s.id !== pin.id || s.mountPath !== pin.mount)) throw storageGone(ctx, pin, end);
  return s && { id: s.id, mount: s.mountPath };
}

/** A task's failure when its pinned storage (`end`: source, destination) was deleted, disabled or changed. */
export function storageGone(ctx: AccessContext, pin: StoragePin, end: string): FatalTaskError {
  return new FatalTaskError(`${end} storage [${shownMount(ctx, pin.mount)}] was deleted or changed`);
}
