/**
 * Storage administration with AList's semantics (alist-compat §7): rows in store.storages, live
 * instances in the MountTable. Records returned here carry the live `status` and the normalised
 * `addition` (every option of the driver with its value, as a JSON string).
 *
 * Errors (all VfsError): unknown id → NOT_FOUND (`record not found` on get, `failed get old storage:
 * record not found` on update, `failed get storage: record not found` on delete/enable/disable);
 * unknown driver → INVALID `failed get driver new: no driver named: X`; bad options → INVALID naming
 * the option; duplicate mount path or id → EXISTS, the store's unique text behind AList's `failed
 * create|update storage in database: `;
 * driver change → INVALID `driver cannot be changed`; enable/disable twice → INVALID `this storage
 * have enabled|disabled`. AList answers all of these with code 500; the REST adapter decides.
 */
import { posix } from 'node:path';
import { VfsError } from '../errors.js';
import { normalize } from '../paths.js';
import { additionJson, parseOptions, type DriverRegistry } from '../../drivers/registry.js';
import type { Store } from '../store/store.js';
import type { StorageRecord } from '../store/types.js';
import { STATUS_DISABLED, STATUS_WORK, type MountTable } from './mounts.js';
import type { ChangeFeed } from './events.js';
import { treePath } from './balance.js';

/** What create/update accept: a storage JSON as the admin page sends it (status/modified ignored). */
export type StorageInput = Partial<Omit<StorageRecord, 'status' | 'modified'>> & { mount_path: string; driver: string };

/** The outcome of a change that (re)initialised a storage: the saved record, and the init error if any. */
export interface StorageChange {
  record: StorageRecord;
  /** Set when the row was saved but the driver failed to init (AList's "already created" case). */
  error?: VfsError;
}

const byOrderThenId = (a: StorageRecord, b: StorageRecord) => a.order - b.order || a.id - b.id;

/**
 * A store write, its refusal worded as AList's op layer wraps the database's (`failed create storage
 * in database: UNIQUE constraint failed: x_storages.mount_path`): the front end shows that text.
 */
async function inDatabase<T>(action: 'create' | 'update', write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (e) {
    if (e instanceof VfsError && e.code === 'EXISTS') throw new VfsError('EXISTS', `failed ${action} storage in database: ${e.message}`);
    throw e;
  }
}

export class StorageService {
  private loadingCount = 0;
  /** The last change queued for each storage id (see serial). */
  private readonly queues = new Map<number, Promise<unknown>>();

  /** Where a creation, deletion or mount path change is announced (the VFS's change feed, set by the composition root). */
  changes?: ChangeFeed;

  constructor(private readonly store: Store, private readonly mounts: MountTable, private readonly registry: DriverRegistry) {}

  /** True while loadAll runs (REST answers `Loading storage, please wait`). */
  get loading(): boolean {
    return this.loadingCount > 0;
  }

  private live(r: StorageRecord): StorageRecord {
    const m = this.mounts.get(r.id);
    return { ...r, status: r.disabled ? STATUS_DISABLED : m?.status ?? r.status };
  }

  /** All storages ordered by order, then id. */
  async list(): Promise<StorageRecord[]> {
    return (await this.store.storages.list()).map((r) => this.live(r)).sort(byOrderThenId);
  }

  get(id: number): Promise<StorageRecord> {
    return this.existing(id, 'record not found');
  }

  /** The live record; a miss is NOT_FOUND `missing` (delete/enable/disable word it as AList's op layer). */
  private async existing(id: number, missing = 'failed get storage: record not found'): Promise<StorageRecord> {
    const r = await this.store.storages.get(id);
    if (!r) throw new VfsError('NOT_FOUND', missing);
    return this.live(r);
  }

  /** Fill defaults, clean the mount path, validate and normalise the options. */
  private prepare(input: StorageInput, base?: StorageRecord): Omit<StorageRecord, 'id'> {
    const def = this.registry.get(input.driver);
    if (!def) throw new VfsError('INVALID', `failed get driver new: no driver named: ${input.driver}`);
    const c = def.config;
    const addition = additionJson(def, parseOptions(def, input.addition ?? base?.addition ?? ''));
    const policy = input.webdav_policy || base?.webdav_policy || (c.only_proxy || c.only_local ? 'native_proxy' : '302_redirect');
    const allowed = c.only_proxy || c.only_local ? ['use_proxy_url', 'native_proxy'] : ['302_redirect', 'use_proxy_url', 'native_proxy'];
    if (!allowed.includes(policy)) throw new VfsError('INVALID', `webdav_policy must be one of ${allowed.join(',')}`);
    const pick = <K extends keyof StorageRecord>(k: K, dflt: StorageRecord[K]): StorageRecord[K] =>
      (input[k as keyof StorageInput] as StorageRecord[K] | undefined) ?? base?.[k] ?? dflt;
    return {
      // Cleaned as AList's FixAndCleanPath does (backslashes made slashes, as an admin on Windows
      // types them; `..` resolved, not refused: alist-compat §7).
      mount_path: normalize(posix.normalize('/' + input.mount_path.replaceAll('\\', '/'))),
      order: Number(pick('order', 0)) || 0,
      driver: input.driver,
      cache_expiration: c.no_cache ? 0 : Number(pick('cache_expiration', 30)) || 0,
      status: base?.status ?? STATUS_WORK,
      addition,
      remark: pick('remark', ''),
      modified: new Date().toISOString(),
      disabled: pick('disabled', false),
      disable_index: pick('disable_index', false),
      enable_sign: pick('enable_sign', false),
      order_by: pick('order_by', ''),
      order_direction: pick('order_direction', ''),
      extract_folder: pick('extract_folder', ''),
      web_proxy: pick('web_proxy', false),
      webdav_policy: policy,
      proxy_range: pick('proxy_range', false),
      down_proxy_url: pick('down_proxy_url', ''),
    };
  }

  /**
   * Run the changes to one storage one at a time. Interleaved, a delete's unmount could come between
   * an update's store write and its mount: the deleted storage went on being served until a restart.
   */
  private serial<T>(id: number, fn: () => Promise<T>): Promise<T> {
    const run = (this.queues.get(id) ?? Promise.resolve()).then(fn);
    const tail = run.catch(() => undefined);
    this.queues.set(id, tail);
    void tail.then(() => this.queues.get(id) === tail && this.queues.delete(id));
    return run;
  }

  /** Mount a saved row and persist the resulting status; returns the change with any init error. */
  private async activate(saved: StorageRecord): Promise<StorageChange> {
    const m = await this.mounts.mount(saved);
    const record = await this.store.storages.update(saved.id, { status: m.status });
    if (m.status === STATUS_WORK || m.status === STATUS_DISABLED) return { record };
    return { record, error: new VfsError('STORAGE_UNAVAILABLE', `failed init storage: ${m.status}`) };
  }

  /**
   * Create and mount a storage. Validation errors throw before anything is saved. An init failure
   * keeps the row (status = the error) and is returned as `error` with the message
   * `failed init storage but storage is already created: failed init storage: <err>`.
   */
  async create(input: StorageInput): Promise<StorageChange> {
    const rec = this.prepare(input);
    const saved = await inDatabase('create', () => this.store.storages.insert({ ...rec, id: input.id || undefined }));
    const change = await this.serial(saved.id, () => this.activate(saved));
    this.mounted(treePath(saved.mount_path), saved.id);
    if (change.error) {
      change.error = new VfsError('STORAGE_UNAVAILABLE', `failed init storage but storage is already created: ${change.error.message}`);
    }
    return change;
  }

  /** Save a changed storage, then re-init it under its (possibly new) mount path unless disabled. */
  update(input: StorageInput & { id: number }): Promise<StorageChange> {
    return this.serial(input.id, () => this.updateNow(input));
  }

  private async updateNow(input: StorageInput & { id: number }): Promise<StorageChange> {
    const old = await this.store.storages.get(input.id);
    if (!old) throw new VfsError('NOT_FOUND', 'failed get old storage: record not found');
    if (old.driver !== input.driver) throw new VfsError('INVALID', 'driver cannot be changed');
    const { id: _id, ...rec } = { ...this.prepare(input, old), id: old.id };
    const saved = await inDatabase('update', () => this.store.storages.update(old.id, rec));
    let change: StorageChange;
    if (saved.disabled) {
      await this.mounts.mount(saved); // replaces the old instance with a disabled placeholder
      change = { record: this.live(saved) };
    } else change = await this.activate(saved);
    // Nothing is served at the old mount path any more: mirrors drop it, as after a deletion.
    // Mirrors drop what the folder of another storage held at the new one (it no longer serves there).
    // Both by tree path: `/x.balance1` made `/x.balance2` is still where it was.
    const from = treePath(old.mount_path);
    const to = treePath(saved.mount_path);
    if (from !== to) {
      this.unmounted(from);
      this.mounted(to, saved.id);
    } else if (saved.addition !== old.addition || saved.disable_index !== old.disable_index) {
      // The same place may show other content now (another root folder, bucket or alias target):
      // what mirrors hold below it may be the old storage's (search found files no longer there).
      // disable_index turned on must take the storage's rows out too (search kept finding its
      // files until a rebuild); turned off, the index lists it again.
      this.changes?.emit({ kind: 'remounted', vpath: to, mounts: this.treePaths() });
    }
    return change;
  }

  /**
   * Mirrors of the tree (search index, WebDAV locks) know storages by where they sit in it: a
   * `.balance` member's mount path is no place there (balance.ts treePath).
   */
  private treePaths(): string[] {
    return this.mounts.all().map((m) => m.vpath);
  }

  /** Nothing is served at tree path `vpath` any more, unless another member of its `.balance` group is there. */
  private unmounted(vpath: string): void {
    // The group still serves the place (its members hold the same files): mirrors keep what they hold.
    if (this.mounts.all().some((m) => m.vpath === vpath)) return;
    this.changes?.emit({ kind: 'unmounted', vpath, mounts: this.treePaths() });
  }

  /** Storage `id` now serves tree path `vpath`. */
  private mounted(vpath: string, id: number): void {
    // Joined a `.balance` group already serving the place: the same files are served there.
    if (this.mounts.all().some((m) => m.id !== id && m.vpath === vpath)) return;
    this.changes?.emit({ kind: 'mounted', vpath, mounts: this.treePaths() });
  }

  delete(id: number): Promise<void> {
    return this.serial(id, () => this.deleteNow(id));
  }

  private async deleteNow(id: number): Promise<void> {
    const record = await this.existing(id);
    await this.mounts.unmount(id);
    await this.store.storages.delete(id);
    // Mirrors of the tree (the search index) drop what they hold of it.
    this.unmounted(treePath(record.mount_path));
  }

  enable(id: number): Promise<StorageChange> {
    return this.serial(id, async () => {
      const r = await this.existing(id);
      if (!r.disabled) throw new VfsError('INVALID', 'this storage have enabled');
      const change = await this.activate(await this.store.storages.update(id, { disabled: false }));
      // AList's EnableStorage wraps LoadStorage's error: `failed load storage: failed init storage: <err>`.
      if (change.error) change.error = new VfsError('STORAGE_UNAVAILABLE', `failed load storage: ${change.error.message}`);
      return change;
    });
  }

  disable(id: number): Promise<void> {
    return this.serial(id, async () => {
      const r = await this.existing(id);
      if (r.disabled) throw new VfsError('INVALID', 'this storage have disabled');
      const saved = await this.store.storages.update(id, { disabled: true, status: STATUS_DISABLED });
      await this.mounts.mount(saved);
    });
  }

  /**
   * (Re)load every storage from the store, all concurrently; each init is bounded by the mount
   * table's timeout, so one hanging backend delays only its own mount path. Safe to run without
   * awaiting (start-up, `load_all`): requests to a path whose storage is still initialising wait
   * for that storage only.
   */
  async loadAll(): Promise<void> {
    this.loadingCount++;
    try {
      const rows = await this.store.storages.list();
      const keep = new Set(rows.map((r) => r.id));
      const gone = this.mounts.all().filter((m) => !keep.has(m.id));
      await Promise.all(gone.map((m) => this.serial(m.id, async () => {
        if (!(await this.store.storages.get(m.id))) await this.mounts.unmount(m.id);
      })));
      // Each row as the store has it once its turn comes: a row deleted or changed meanwhile is not
      // mounted as it was listed.
      await Promise.all(rows.map((r) => this.serial(r.id, async () => {
        const now = await this.store.storages.get(r.id);
        if (now) await this.mounts.mount(now);
      })));
    } finally {
      this.loadingCount--;
    }
  }
}
