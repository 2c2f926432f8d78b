/**
 * AList's load balancing (`.balance`): storages mounted at `/test`, `/test.balance1`,
 * `/test.balance2` all sit at `/test` in the tree and serve it together, as a group (the admin is
 * expected to keep their files the same: mirrors, or one backend behind several accounts). The
 * mount table (./mounts.ts) finds a path's group; this file says where a storage sits in the tree
 * and which member of its group serves a request.
 */
import { segments } from '../paths.js';
import { STATUS_WORK, type Mount } from './mounts.js';

/** What marks a mount path as one more member of a group. */
const BALANCE_MARK = '.balance';

/**
 * Where a storage sits in the tree: its mount path with a trailing `.balance…` cut from the last
 * segment (`/test.balance1` → `/test`; `/.balance2` → `/`). AList cuts at the last `.balance`
 * anywhere in the path, which turns `/a.balance1/b` into `/a` (that storage then covered all of
 * `/a`, hiding the one mounted there); nobody relies on that, so only the last segment counts.
 */
export function treePosition(mountPath: string): { segments: string[]; balanced: boolean } {
  const segs = segments(mountPath);
  const last = segs.at(-1);
  const cut = last === undefined ? -1 : last.lastIndexOf(BALANCE_MARK);
  if (cut < 0) return { segments: segs, balanced: false };
  const name = last!.slice(0, cut);
  return { segments: name ? [...segs.slice(0, -1), name] : segs.slice(0, -1), balanced: true };
}

/** treePosition as a path (`/test.balance1` → `/test`): what mirrors of the tree know a storage by. */
export function treePath(mountPath: string): string {
  return '/' + treePosition(mountPath).segments.join('/');
}

/** Storages in the order AList lists them: by order, then mount path. */
export function byOrder(a: Mount, b: Mount): number {
  const d = a.record.order - b.record.order;
  if (d) return d;
  return a.record.mount_path < b.record.mount_path ? -1 : a.record.mount_path > b.record.mount_path ? 1 : 0;
}

/** Initialised and in service (status `work`). */
export function working(m: Mount): boolean {
  return m.status === STATUS_WORK && !!m.driver;
}

/**
 * What a path is resolved for, which matters in a group only (Balancer.pick): `write` goes to the
 * group's primary; `read` takes turns among its working members, and every read made for one
 * `request` (any object standing for it: the VFS passes AccessContext.request, else the context)
 * gets the same member.
 */
export type Intent = { readonly kind: 'write' } | { readonly kind: 'read'; readonly request: object };
export const WRITE: Intent = { kind: 'write' };

export class Balancer {
  /** Whose turn it is next in each group, by the group's tree path. */
  private readonly turns = new Map<string, number>();
  /** The member (id) each request reads from, by group tree path: weak, gone with the request. */
  private readonly readers = new WeakMap<object, Map<string, number>>();

  /**
   * The member of `group` (the storages at one tree path, by order) that serves a request.
   *
   * Writes go to one member, the primary: the storage mounted without a `.balance` suffix, else the
   * first working one. AList hands writes round the members too, so a rename's source and its
   * destination were looked up on different storages at random and the rename failed ("can't move
   * files between two storages"), or an upload landed on whichever member had its turn.
   *
   * Reads take turns among the working members. One that is disabled or failed to init is skipped
   * while another works, deliberately: AList hands requests to a broken member as well, and its
   * turn fails. All reads of one request go to the same member: a download looks the file up, then
   * reads it, and those two on different members took the size from one and the bytes from the
   * other (and, two turns a request, a group of two served every download from the same member).
   * With no member working, the primary answers as a single storage would (its status).
   */
  pick(group: readonly Mount[], intent: Intent): Mount {
    const primary = group.find((m) => !m.balanced) ?? group.find(working) ?? group[0]!;
    if (intent.kind === 'write' || group.length === 1) return primary;
    const up = group.filter(working);
    if (!up.length) return primary;
    const key = primary.vpath;
    let chosen = this.readers.get(intent.request);
    const again = up.find((m) => m.id === chosen?.get(key));
    if (again) return again;
    const turn = (this.turns.get(key) ?? 0) % up.length;
    this.turns.set(key, turn + 1);
    if (!chosen) this.readers.set(intent.request, (chosen = new Map()));
    chosen.set(key, up[turn]!.id);
    return up[turn]!;
  }

  /** No storage sits at `vpath` any more. */
  forget(vpath: string): void {
    this.turns.delete(vpath);
  }
}
