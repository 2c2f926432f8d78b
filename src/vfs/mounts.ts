/**
 * The mount table: which storage serves which part of the virtual tree. This is the one place that
 * turns a virtual path into (mount, driver path), by the longest mount path that is a prefix of it on
 * whole segments (`/a` serves `/a/b`, never `/ab`). Folders above mount points that no storage
 * covers are "virtual": they exist only to list the mount points below them.
 *
 * Every storage in the store has an entry, whatever its state: a storage that is disabled, failed to
 * init or names an unknown driver still owns its mount path and answers STORAGE_UNAVAILABLE
 * (`storage not init: <status>`), so its requests never fall through to a parent storage.
 *
 * Replacing or removing a storage retires its instance gracefully: new requests go to the
 * replacement at once, while operations that had already resolved the old instance (a 20 GB
 * WebDAV upload) finish on it. `resolve` holds the mount for the operation and `release` gives it
 * back; a retired instance's driver is dropped when its last hold is released (at once when idle).
 *
 * Work that comes back for more over time (an SFTP handle: each READ, WRITE or CLOSE is a new
 * request) asks `serves` before each request. An instance still serves when its replacement keeps
 * the storage working at the same mount path with the same options (an edit of its remark, order or
 * cache; load_all): the handle goes on with it. Deleted, disabled, moved, or its options changed (another
 * root folder, bucket, account): the admin took those files out of the tree there, so the instance is
 * withdrawn (`withdrawal` aborts) and later requests are refused, as an unbounded handle otherwise kept
 * reading, and landed its upload at CLOSE, in a storage the admin had removed.
 *
 * Load balancing (AList's `.balance`): storages mounted at `/test`, `/test.balance1`, `/test.balance2`
 * all sit at `/test` in the tree (treePosition) and serve it together, as a group: reads take turns
 * among its working members, writes go to its primary (./balance.ts). The admin API still shows each
 * storage at its own mount path; the tree shows `test` once.
 */
import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import { STORAGE_DISABLED_MESSAGE, VfsError } from '../errors.js';
import { join, parent, segments } from '../paths.js';
import { capabilitiesOf, type Capabilities, type Driver, type DriverDefinition, type StorageLease, type TreeAccess } from '../../drivers/types.js';
import { parseOptions, type DriverRegistry } from '../../drivers/registry.js';
import type { StorageRecord } from '../store/types.js';
import type { Entry, StorageInfo } from './types.js';
import type { ListingCache } from './cache.js';
import { Balancer, byOrder, treePosition, working, WRITE, type Intent } from './balance.js';

export const STATUS_WORK = 'work';
export const STATUS_DISABLED = 'disabled';
export const DEFAULT_INIT_TIMEOUT_MS = 15_000;

const NO_CAPABILITIES: Capabilities = {
  canGet: false, canMkdir: false, canRename: false, canMove: false, canCopy: false,
  canRemove: false, canPut: false, canSetModified: false, canUsage: false, canWatch: false,
};

/** One storage in the table. `status` is `work`, `disabled`, or the init error text. */
export interface Mount {
  readonly id: number;
  readonly record: StorageRecord;
  /** Where it sits in the tree, split into segments (`/` is `[]`): its mount path without a `.balance` suffix (treePosition). */
  readonly segments: readonly string[];
  /** The same as a path: what the mount's driver path `/` is in the tree. */
  readonly vpath: string;
  /** Its mount path had a `.balance` suffix: a secondary member of the group at `vpath`. */
  readonly balanced: boolean;
  readonly definition?: DriverDefinition;
  /** Present once init succeeded; never call it while status is not `work`. */
  driver?: Driver;
  capabilities: Capabilities;
  status: string;
  /** Settles (never rejects) when init has finished either way. */
  readonly ready: Promise<void>;
  /** Operations under way on this instance: taken by `resolve`, given back by `release`. */
  holds: number;
  /**
   * Out of the table (replaced or removed). Its id now names the replacement, so whatever a
   * draining operation learns must not be filed under it (see Tree.list).
   */
  retired: boolean;
  /** Aborted (reason: a STORAGE_UNAVAILABLE VfsError) once this instance no longer serves (MountTable.serves). */
  readonly withdrawal: AbortController;
}

/** A change made outside treegate, reported by a storage's driver (`watch`), in tree terms. */
export interface MountChange {
  mount: Mount;
  /** Absolute virtual path of what changed. */
  vpath: string;
  dpath: string;
}

interface WatchSub {
  listener: (c: MountChange) => void;
  accept?: (m: Mount) => boolean;
}

export type Resolution =
  | { kind: 'mount'; mount: Mount; dpath: string }
  | { kind: 'virtual' };

export interface MountTableDeps {
  registry: DriverRegistry;
  log: Logger;
  dataDir: string;
  cache?: ListingCache;
  /** Upper bound for one driver's init; a hanging backend becomes an error status. */
  initTimeoutMs?: number;
  /** The virtual tree for drivers that present parts of it (DriverContext.tree); read at each init. */
  tree?: () => TreeAccess | undefined;
  /** This server process's random id (DriverContext.instanceId), for drivers that detect loops. */
  instanceId?: string;
}

export class MountTable {
  private readonly mounts = new Map<number, Mount>();
  private readonly watchSubs = new Set<WatchSub>();
  /** Running driver watches by mount id, as their stop functions. */
  private readonly watching = new Map<number, () => void | Promise<void>>();
  /** Retired mounts whose driver waits for their last operation to end. */
  private readonly draining = new Set<Mount>();
  /** Which member of a `.balance` group serves each request. */
  private readonly balance = new Balancer();
  /**
   * Instances someone waits on the withdrawal of (lease().onWithdrawn), with how many wait. Judged
   * again at each change of their storage, as draining ones are: an instance that holds nothing (an
   * SFTP handle reading a Local file by its descriptor) is withdrawn at the change that removes it.
   */
  private readonly awaited = new Map<Mount, number>();

  constructor(private readonly deps: MountTableDeps) {}

  /**
   * Follow changes made outside treegate on the working storages whose driver can watch and that
   * `accept` admits (all by default). A driver's watch runs only while some subscriber wants its
   * mount, so nothing is watched when nobody listens. Returns the unsubscribe function.
   */
  watch(listener: (c: MountChange) => void, accept?: (m: Mount) => boolean): () => void {
    const sub: WatchSub = { listener, accept };
    this.watchSubs.add(sub);
    for (const m of this.mounts.values()) this.syncWatch(m);
    return () => {
      this.watchSubs.delete(sub);
      for (const m of this.mounts.values()) this.syncWatch(m);
    };
  }

  private syncWatch(m: Mount): void {
    const d = m.driver;
    const want = !!d?.watch && m.status === STATUS_WORK && this.mounts.get(m.id) === m
      && [...this.watchSubs].some((s) => !s.accept || s.accept(m));
    const stop = this.watching.get(m.id);
    if (want && !stop) {
      try {
        this.watching.set(m.id, d!.watch!((dpath) => this.outsideChange(m, dpath)));
      } catch (err) {
        this.deps.log.warn({ err, mount: m.record.mount_path }, 'storage watch failed to start');
      }
    } else if (!want && stop) {
      this.watching.delete(m.id);
      void Promise.resolve().then(stop).catch(() => undefined);
    }
  }

  private outsideChange(m: Mount, dpath: string): void {
    if (this.mounts.get(m.id) !== m) return;
    let vpath: string;
    try {
      vpath = join(m.vpath, dpath);
    } catch {
      return; // a name the tree cannot carry
    }
    // Listings cached before the change are stale now, exactly as after one of our own writes.
    this.deps.cache?.invalidate(m.id, parent(dpath));
    this.deps.cache?.invalidateTree(m.id, dpath);
    for (const s of this.watchSubs) {
      if (s.accept && !s.accept(m)) continue;
      try {
        s.listener({ mount: m, vpath, dpath });
      } catch {
        // one subscriber's failure must not starve the others
      }
    }
  }

  /**
   * (Re)mount a storage record: drop any previous instance with the same id, create the driver and
   * init it with a bounded timeout. Resolves with the mount once init has finished; never throws
   * for driver failures (they become the mount's status).
   */
  async mount(record: StorageRecord): Promise<Mount> {
    const def = this.deps.registry.get(record.driver);
    let settle!: () => void;
    const ready = new Promise<void>((r) => (settle = r));
    const at = treePosition(record.mount_path);
    const m: Mount = {
      id: record.id, record: { ...record }, segments: at.segments, vpath: '/' + at.segments.join('/'), balanced: at.balanced, definition: def,
      capabilities: NO_CAPABILITIES, status: 'initializing', ready, holds: 0, retired: false,
      withdrawal: new AbortController(),
    };
    // One abort listener per SFTP handle or copy open on the instance (onWithdrawn), by design: past
    // Node's default of 10, a client with 11 files open logged a "possible memory leak" warning.
    setMaxListeners(0, m.withdrawal.signal);
    // The new instance takes the old one's place before the old one is retired (its watch stopped,
    // its driver dropped: a Local watch first finishes its scan of the tree): requests wait for the
    // new one's init. Unmounted first, the path belonged meanwhile to the storage above it: a
    // listing answered `object not found`, an upload went to the parent storage.
    const old = this.mounts.get(record.id);
    this.mounts.set(record.id, m);
    if (old) await this.retire(old, false);
    try {
      if (record.disabled) m.status = STATUS_DISABLED;
      else if (!def) m.status = `failed get driver new: no driver named: ${record.driver}`;
      else await this.init(m, def);
    } finally {
      m.record.status = m.status;
      settle();
    }
    return m;
  }

  private async init(m: Mount, def: DriverDefinition): Promise<void> {
    const log = this.deps.log.child({ mount: m.record.mount_path, driver: def.config.name });
    let driver: Driver | undefined;
    const ms = this.deps.initTimeoutMs ?? DEFAULT_INIT_TIMEOUT_MS;
    const ac = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    try {
      driver = await def.create(parseOptions(def, m.record.addition), {
        log, dataDir: this.deps.dataDir, tree: this.deps.tree?.(), instanceId: this.deps.instanceId,
      });
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          ac.abort();
          reject(new Error(`init timed out after ${ms} ms`));
        }, ms);
      });
      const initing = driver.init(ac.signal);
      initing.catch(() => undefined); // if the timeout wins, a late rejection must not go unhandled
      await Promise.race([initing, timeout]);
      if (this.mounts.get(m.id) !== m) {
        await driver.drop(); // unmounted or replaced while initialising
        return;
      }
      m.driver = driver;
      m.capabilities = capabilitiesOf(driver, def.config);
      m.status = STATUS_WORK;
      this.syncWatch(m);
    } catch (e) {
      m.status = e instanceof Error ? e.message : String(e);
      log.warn({ err: e }, 'storage init failed');
      await driver?.drop().catch(() => undefined);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Remove a storage from the tree. Its driver is dropped now when no operation holds it, else
   * once the last one is released (the returned promise does not wait for that). Unknown ids are
   * ignored.
   */
  async unmount(id: number): Promise<void> {
    const m = this.mounts.get(id);
    if (m) await this.retire(m, false);
  }

  /** Drop every driver at once, draining ones too: a stopping server bounds its own wait for writes. */
  async dropAll(): Promise<void> {
    const draining = [...this.draining];
    this.draining.clear();
    await Promise.all([...[...this.mounts.values()].map((m) => this.retire(m, true)), ...draining.map((m) => this.drop(m))]);
  }

  private async retire(m: Mount, now: boolean): Promise<void> {
    // All in one step: from here on, no request reaches `m` and nothing it lists is cached under its id.
    if (this.mounts.get(m.id) === m) this.mounts.delete(m.id); // else its replacement is in place
    m.retired = true;
    // Judged now, while the table holds what replaced it: this one, and those of the same storage still draining.
    this.serves(m);
    for (const d of [...this.draining, ...this.awaited.keys()]) if (d.id === m.id) this.serves(d);
    this.deps.cache?.dropMount(m.id);
    if (!this.all().some((o) => o.vpath === m.vpath)) this.balance.forget(m.vpath);
    const stopWatch = this.watching.get(m.id);
    this.watching.delete(m.id);
    await Promise.resolve().then(() => stopWatch?.()).catch(() => undefined);
    // Joined to `draining` only once the watch has stopped: drivers are never dropped while watching.
    if (now || m.holds === 0) return this.drop(m);
    this.draining.add(m);
    this.deps.log.info({ mount: m.record.mount_path, operations: m.holds }, 'storage replaced or removed: old instance drains its operations');
  }

  private async drop(m: Mount): Promise<void> {
    const d = m.driver;
    m.driver = undefined;
    m.status = STATUS_DISABLED;
    await d?.drop().catch(() => undefined);
  }

  /**
   * One more hold on a mount `resolve` gave out earlier (a stream opened later from its link); false
   * once its driver is gone. Give it back with `release`.
   */
  hold(m: Mount): boolean {
    if (!m.driver) return false;
    m.holds++;
    return true;
  }

  /** Give back a hold taken by `resolve` or `hold`; the last one on a draining mount drops its driver. */
  release(m: Mount): void {
    if (--m.holds === 0 && m.retired && this.draining.delete(m)) {
      void this.drop(m).then(() => this.deps.log.info({ mount: m.record.mount_path }, 'storage: drained old instance dropped'));
    }
  }

  /**
   * Whether a retired `m`'s files are still where its virtual paths say: its storage is still mounted
   * at the same path with the same options. Not retired: yes.
   */
  inPlace(m: Mount): boolean {
    if (!m.retired) return true;
    const now = this.mounts.get(m.id);
    return !!now && now.record.mount_path === m.record.mount_path && now.record.addition === m.record.addition;
  }

  /**
   * Whether requests made now may still go to `m` (see the header): in place and not disabled. Once
   * false, false for good: `m` is withdrawn.
   */
  serves(m: Mount): boolean {
    if (m.withdrawal.signal.aborted) return false;
    const now = this.mounts.get(m.id);
    if (this.inPlace(m) && !(m.retired && now!.record.disabled)) return true;
    const what = !now ? 'deleted' : now.record.disabled ? 'disabled' : 'moved or its options changed';
    m.withdrawal.abort(new VfsError('STORAGE_UNAVAILABLE', `storage [${m.record.mount_path}] was ${what}`, { publicText: 'storage was changed or removed' }));
    return false;
  }

  /** serves(m), throwing the withdrawal's STORAGE_UNAVAILABLE when it does not. */
  assertServes(m: Mount): void {
    if (!this.serves(m)) throw m.withdrawal.signal.reason;
  }

  /** `m` for work that goes on using it over time (see the header): asked, or told, once it is withdrawn. */
  lease(m: Mount): StorageLease {
    return { check: () => this.assertServes(m), onWithdrawn: (fn) => this.onWithdrawn(m, fn) };
  }

  private onWithdrawn(m: Mount, fn: (reason: unknown) => void): () => void {
    const signal = m.withdrawal.signal;
    if (!this.serves(m)) {
      fn(signal.reason);
      return () => undefined;
    }
    let waiting = true;
    const stopWaiting = () => {
      if (!waiting) return;
      waiting = false;
      signal.removeEventListener('abort', listener);
      const n = this.awaited.get(m)! - 1;
      if (n > 0) this.awaited.set(m, n);
      else this.awaited.delete(m);
    };
    // Told once: the retired instance leaves `awaited` then, not when the handle is closed (maybe never).
    const listener = () => {
      stopWaiting();
      fn(signal.reason);
    };
    signal.addEventListener('abort', listener, { once: true });
    this.awaited.set(m, (this.awaited.get(m) ?? 0) + 1);
    return stopWaiting;
  }

  get(id: number): Mount | undefined {
    return this.mounts.get(id);
  }

  all(): Mount[] {
    return [...this.mounts.values()];
  }

  /**
   * The mounts owning `segs`: the longest tree path that is a prefix of it on whole segments, with
   * every storage sitting there (several for a `.balance` group), whatever their status; by order.
   */
  private owners(segs: readonly string[]): Mount[] {
    let best: Mount[] = [];
    for (const m of this.mounts.values()) {
      const n = m.segments.length;
      if (n > segs.length || (best.length && n < best[0]!.segments.length)) continue;
      if (!m.segments.every((s, i) => s === segs[i])) continue;
      if (best.length && n === best[0]!.segments.length) best.push(m);
      else best = [m];
    }
    return best.sort(byOrder);
  }

  /** The ids of the storages sitting where `m` does in the tree (its `.balance` group, `m` first). */
  groupIds(m: Mount): number[] {
    return [m.id, ...this.all().filter((o) => o.id !== m.id && o.vpath === m.vpath).map((o) => o.id)];
  }

  /**
   * Where a virtual path lives, for `intent` (see Balancer.pick). Waits for mounts that are still
   * initialising (bounded by the init timeout). Throws STORAGE_UNAVAILABLE for a mount not in `work`
   * status, NOT_FOUND when no storage covers the path and no storage lies below it. `/` is always at
   * least virtual.
   *
   * A mount returned is held for the caller's operation: pass it to `release` once the operation
   * (and any stream it handed out from the driver) is over.
   */
  async resolve(vpath: string, intent: Intent = WRITE): Promise<Resolution> {
    const segs = segments(vpath);
    for (let group = this.owners(segs); group.length; group = this.owners(segs)) {
      await this.readyFor(group, intent);
      // Replaced, removed or joined meanwhile: the table decides again.
      const now = this.owners(segs);
      if (now.length !== group.length || now.some((m, i) => m !== group[i])) continue;
      const m = this.balance.pick(group, intent);
      if (!working(m)) {
        const message = m.status === STATUS_DISABLED ? STORAGE_DISABLED_MESSAGE : `storage not init: ${m.status}`;
        throw new VfsError('STORAGE_UNAVAILABLE', message, { path: vpath });
      }
      m.holds++;
      return { kind: 'mount', mount: m, dpath: '/' + segs.slice(m.segments.length).join('/') };
    }
    if (segs.length === 0 || this.hasMountsBelow(vpath)) return { kind: 'virtual' };
    throw new VfsError('NOT_FOUND', undefined, { path: vpath });
  }

  /**
   * What `resolve` waits for in `group`: only the members that may serve `intent`. A read with a
   * member working now does not wait for the others' init (a member re-enabled or edited, its
   * backend slow, held up the whole group's folder for up to the init timeout); a write waits for
   * the unsuffixed primary. Otherwise every member: which one serves depends on which init works.
   */
  private readyFor(group: readonly Mount[], intent: Intent): Promise<unknown> {
    if (group.length === 1) return group[0]!.ready; // the usual case: no array of promises per request
    if (intent.kind === 'read' && group.some(working)) return Promise.resolve();
    const primary = group.find((m) => !m.balanced);
    if (intent.kind === 'write' && primary) return primary.ready;
    return Promise.all(group.map((m) => m.ready));
  }

  private isBelow(m: Mount, segs: readonly string[]): boolean {
    return m.status !== STATUS_DISABLED && m.segments.length > segs.length && segs.every((s, i) => s === m.segments[i]);
  }

  /** Listed (not disabled) mounts strictly below `segs`. */
  private below(segs: readonly string[]): Mount[] {
    return [...this.mounts.values()].filter((m) => this.isBelow(m, segs));
  }

  /** Whether any listed mount lies strictly below `vpath` (childMounts without building the entries). */
  hasMountsBelow(vpath: string): boolean {
    const segs = segments(vpath);
    for (const m of this.mounts.values()) {
      if (this.isBelow(m, segs)) return true;
    }
    return false;
  }

  /**
   * Mount points directly or indirectly below `vpath`, as virtual folders named by the next segment
   * (size 0, modified = the storage's modified), sorted by order then mount path.
   */
  childMounts(vpath: string): Entry[] {
    const segs = segments(vpath);
    const first = new Map<string, Mount>();
    for (const m of this.below(segs)) {
      const name = m.segments[segs.length]!;
      const cur = first.get(name);
      if (!cur || byOrder(m, cur) < 0) first.set(name, m);
    }
    return [...first.entries()]
      .sort(([, a], [, b]) => byOrder(a, b))
      .map(([name, m]) => ({
        name, size: 0, isDir: true, modified: new Date(m.record.modified), vpath: join(vpath, name), virtual: true,
      }));
  }

  /** What adapters may know about a mount. */
  info(m: Mount): StorageInfo {
    const config = m.definition?.config ?? {
      name: m.record.driver, local_sort: false, only_local: false, only_proxy: false, no_cache: true,
      no_upload: true, need_ms: false, default_root: '', alert: '',
    };
    return {
      id: m.id, mountPath: m.vpath, driverName: m.record.driver, config: { ...config },
      capabilities: { ...m.capabilities }, webdavPolicy: m.record.webdav_policy, downProxyUrl: m.record.down_proxy_url,
      webProxy: m.record.web_proxy, enableSign: m.record.enable_sign,
    };
  }
}
