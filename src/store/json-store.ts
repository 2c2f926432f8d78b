/**
 * The embedded store: one JSON document in DATA, loaded into memory, written through lowdb with an
 * atomic adapter. Writes are serialised and coalesced (changes made while a write is in flight go
 * out together in the next one); a mutation's promise resolves only once it is on disk.
 */
import { randomUUID } from 'node:crypto';
import { readdir, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Low } from 'lowdb';
import { watch, type FSWatcher } from 'node:fs';
import { VfsError } from '../errors.js';
import { AtomicJsonFile } from './atomic-file.js';
import { migrate, SCHEMA_VERSION, emptyData, type StoreData } from './schema.js';
import type { KvRepo, Repo, RevocationRepo, SettingRepo, Store, TaskRepo } from './store.js';
import type { TaskRecord } from './types.js';

type Collection = 'users' | 'sshKeys' | 'metas' | 'storages';
type Unique = { fields: string[]; message: string };

const UNIQUE: Record<Collection, Unique[]> = {
  users: [{ fields: ['username'], message: 'UNIQUE constraint failed: x_users.username' }],
  sshKeys: [{ fields: ['user_id', 'title'], message: 'key with the same title already exists' }],
  metas: [{ fields: ['path'], message: 'UNIQUE constraint failed: x_meta.path' }],
  storages: [{ fields: ['mount_path'], message: 'UNIQUE constraint failed: x_storages.mount_path' }],
};

const clone = <T>(v: T): T => structuredClone(v);

export class JsonStore implements Store {
  readonly users;
  readonly sshKeys;
  readonly metas;
  readonly storages;
  readonly tasks: TaskRepo;
  readonly settings: SettingRepo;
  readonly revokedTokens: RevocationRepo;
  readonly kv: KvRepo;

  private readonly adapter: AtomicJsonFile<StoreData>;
  private readonly db: Low<StoreData>;
  private scheduled: Promise<void> | null = null;
  private chain: Promise<void> = Promise.resolve();
  private watcher: FSWatcher | undefined;
  private readonly listeners = new Set<() => void>();
  /** Repo.revision(): bumped by each write to a collection, and for all of them by a reload. */
  private readonly revisions: Record<Collection, number> = { users: 0, sshKeys: 0, metas: 0, storages: 0 };
  /** Stamped into every document we write, so the watcher can tell our writes from other processes'. */
  private readonly instanceId = randomUUID();

  private constructor(readonly file: string) {
    this.adapter = new AtomicJsonFile<StoreData>(file);
    this.db = new Low<StoreData>(this.adapter, emptyData());
    this.users = this.repo('users');
    this.sshKeys = this.repo('sshKeys');
    this.metas = this.repo('metas');
    this.storages = this.repo('storages');
    this.tasks = this.taskRepo();
    this.settings = this.settingRepo();
    this.revokedTokens = this.revocationRepo();
    this.kv = this.kvRepo();
  }

  /** Open (or create) the store file. `watch` reloads on changes made by other processes. */
  static async open(file: string, opts: { watch?: boolean } = {}): Promise<JsonStore> {
    const s = new JsonStore(file);
    await s.sweepTempFiles();
    await s.db.read();
    const before = s.db.data.schema_version;
    s.db.data = migrate(s.db.data ?? emptyData());
    if (before !== SCHEMA_VERSION || s.adapter.lastText === undefined) await s.flush();
    if (opts.watch) s.startWatching();
    return s;
  }

  get data(): StoreData {
    return this.db.data;
  }

  onExternalChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.watcher?.close();
    await this.chain;
  }

  /** Persist the current in-memory state; resolves when it is durable. */
  flush(): Promise<void> {
    if (this.scheduled) return this.scheduled;
    const p = this.chain.then(() => {
      this.scheduled = null;
      this.db.data.writer = this.instanceId;
      return this.db.write();
    });
    this.scheduled = p;
    this.chain = p.catch(() => undefined);
    return p;
  }

  private async sweepTempFiles(): Promise<void> {
    const dir = dirname(this.file);
    const prefix = basename(this.file) + '.';
    const names = await readdir(dir).catch(() => [] as string[]);
    await Promise.all(names.filter((n) => n.startsWith(prefix) && n.endsWith('.tmp')).map((n) => rm(join(dir, n), { force: true })));
  }

  private startWatching(): void {
    // Watch the directory, not the file: every write replaces the file (a rename onto its name),
    // and a watch on the file itself follows the old inode and goes deaf after the first one.
    const name = basename(this.file);
    let timer: NodeJS.Timeout | undefined;
    const reload = async () => {
      const previous = this.adapter.lastText;
      const fresh = new AtomicJsonFile<StoreData>(this.file);
      let next: StoreData | null;
      try {
        next = await fresh.read();
      } catch {
        return; // a partial view of someone else's write; the next event brings the whole file
      }
      // Our own writes (possibly an older one, seen late) are never "external".
      if (!next || next.writer === this.instanceId || fresh.lastText === previous) return;
      this.db.data = migrate(next);
      this.adapter.lastText = fresh.lastText;
      for (const c of Object.keys(this.revisions) as Collection[]) this.revisions[c]++;
      for (const l of this.listeners) l();
    };
    this.watcher = watch(dirname(this.file), { persistent: false }, (_event, filename) => {
      if (filename !== name) return;
      clearTimeout(timer);
      timer = setTimeout(() => void reload(), 30); // a burst of events is one change
    });
  }

  private checkUnique(name: Collection, rec: Record<string, unknown>): void {
    const rows = this.db.data[name] as unknown as Array<Record<string, unknown>>;
    for (const u of UNIQUE[name]) {
      if (rows.some((r) => r.id !== rec.id && u.fields.every((f) => r[f] === rec[f]))) {
        throw new VfsError('EXISTS', u.message);
      }
    }
  }

  private repo<N extends Collection>(name: N): Repo<StoreData[N][number]> {
    type T = StoreData[N][number];
    const rows = () => this.db.data[name] as T[];
    return {
      list: async () => clone(rows()),
      get: async (id) => {
        const r = rows().find((x) => x.id === id);
        return r && clone(r);
      },
      findBy: async (field, value) => clone(rows().filter((r) => r[field] === value)),
      insert: async (rec) => {
        const all = rows();
        const counters = this.db.data.counters;
        let id = rec.id ?? 0;
        if (id > 0 && all.some((r) => r.id === id)) throw new VfsError('EXISTS', `UNIQUE constraint failed: ${name}.id`);
        if (!id) id = Math.max(counters[name] ?? 0, ...all.map((r) => r.id)) + 1;
        const full = { ...clone(rec), id } as T;
        this.checkUnique(name, full as unknown as Record<string, unknown>);
        counters[name] = Math.max(counters[name] ?? 0, id);
        all.push(full);
        all.sort((a, b) => a.id - b.id);
        this.revisions[name]++;
        await this.flush();
        return clone(full);
      },
      update: async (id, patch) => {
        const all = rows();
        const i = all.findIndex((r) => r.id === id);
        if (i < 0) throw new VfsError('NOT_FOUND', 'record not found');
        const next = { ...all[i]!, ...clone(patch), id } as T;
        this.checkUnique(name, next as unknown as Record<string, unknown>);
        all[i] = next;
        this.revisions[name]++;
        await this.flush();
        return clone(next);
      },
      delete: async (id) => {
        const all = rows();
        const i = all.findIndex((r) => r.id === id);
        if (i < 0) return false;
        all.splice(i, 1);
        this.revisions[name]++;
        await this.flush();
        return true;
      },
      revision: () => this.revisions[name],
    };
  }

  private taskRepo(): TaskRepo {
    const rows = () => this.db.data.tasks;
    return {
      list: async () => clone(rows()),
      get: async (id) => {
        const r = rows().find((t) => t.id === id);
        return r && clone(r);
      },
      put: async (rec: TaskRecord) => {
        const all = rows();
        const i = all.findIndex((t) => t.id === rec.id);
        if (i < 0) all.push(clone(rec));
        else all[i] = clone(rec);
        await this.flush();
      },
      delete: async (id) => {
        const all = rows();
        const i = all.findIndex((t) => t.id === id);
        if (i < 0) return false;
        all.splice(i, 1);
        await this.flush();
        return true;
      },
    };
  }

  private settingRepo(): SettingRepo {
    return {
      all: async () => ({ ...this.db.data.settings }),
      setMany: async (values) => {
        Object.assign(this.db.data.settings, values);
        await this.flush();
      },
      delete: async (key) => {
        if (!(key in this.db.data.settings)) return false;
        delete this.db.data.settings[key];
        await this.flush();
        return true;
      },
    };
  }

  private revocationRepo(): RevocationRepo {
    return {
      add: async (t) => {
        this.db.data.revokedTokens.push({ ...t });
        await this.flush();
      },
      has: async (id) => this.db.data.revokedTokens.some((t) => t.id === id),
      purge: async (nowSec) => {
        const before = this.db.data.revokedTokens.length;
        this.db.data.revokedTokens = this.db.data.revokedTokens.filter((t) => t.exp >= nowSec);
        if (this.db.data.revokedTokens.length !== before) await this.flush();
      },
    };
  }

  private kvRepo(): KvRepo {
    const ns = (n: string) => (this.db.data.kv[n] ??= {});
    return {
      get: async <T>(n: string, key: string) => {
        const v = this.db.data.kv[n]?.[key];
        return v === undefined ? undefined : (clone(v) as T);
      },
      set: async (n, key, value) => {
        ns(n)[key] = clone(value);
        await this.flush();
      },
      delete: async (n, key) => {
        const m = this.db.data.kv[n];
        if (!m || !(key in m)) return false;
        delete m[key];
        await this.flush();
        return true;
      },
      entries: async <T>(n: string) => Object.entries(clone(this.db.data.kv[n] ?? {})) as Array<[string, T]>,
    };
  }
}
