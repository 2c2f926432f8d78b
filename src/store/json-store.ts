/**
 * The embedded store: one JSON document in DATA, loaded into memory, written through lowdb with an
 * atomic adapter. Writes are serialised and coalesced (changes made while a write is in flight go
 * out together in the next one); a mutation's promise resolves only once it is on disk. A write that
 * fails (a full disk) puts memory back to what the file holds, so a change whose caller got an error
 * is not kept, listed, or saved later by someone else's write.
 */
import { randomUUID } from 'node:crypto';
import { lstat, readFile, readdir, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Low } from 'lowdb';
import { watch, type FSWatcher } from 'node:fs';
import { VfsError } from '../errors.js';
import { AtomicJsonFile } from './atomic-file.js';
import type { Journal } from './journal.js';
import { KvJournal } from './kv-journal.js';
import { TaskJournal } from './task-journal.js';
import { migrate, validate, SCHEMA_VERSION, emptyData, type StoreData } from './schema.js';
import { claimOwner, isAlive, OWNER_FILE, REQUEST_RE, resultName } from './owner.js';
import type { KvRepo, Repo, RevocationRepo, SettingRepo, Store, TaskRepo } from './store.js';

type Collection = 'users' | 'sshKeys' | 'metas' | 'storages';
type Unique = { fields: string[]; message: string };

const UNIQUE: Record<Collection, Unique[]> = {
  users: [{ fields: ['username'], message: 'UNIQUE constraint failed: x_users.username' }],
  sshKeys: [{ fields: ['user_id', 'title'], message: 'key with the same title already exists' }],
  metas: [{ fields: ['path'], message: 'UNIQUE constraint failed: x_meta.path' }],
  storages: [{ fields: ['mount_path'], message: 'UNIQUE constraint failed: x_storages.mount_path' }],
};

/** AList's table for each collection, as its database names it in a refusal (sqlite's text). */
const TABLE: Record<Collection, string> = { users: 'x_users', sshKeys: 'x_ssh_public_keys', metas: 'x_meta', storages: 'x_storages' };

const clone = <T>(v: T): T => structuredClone(v);

/** A temp file written before a rename onto `<name>`: `<name>.<pid>.<n or uuid>.tmp`. */
const TEMP_NAME = /^(.+)\.(\d+)\.[^.]+\.tmp$/;
/** The CLI's requests and the server's answers (owner.ts). */
const CONTROL_NAME = /^control-[0-9a-f-]{36}\.(request|result)$/;
/** An owner marker set aside to be checked (owner.ts removeStale). */
const STALE_MARKER = /^server\.pid\.[0-9a-f-]{36}\.stale$/;
const STALE_MARKER_AGE_MS = 60_000;

/** The journals' file names, beside the store file (journal.ts): tasks, and the key-value data. */
export const TASKS_FILE = 'tasks.jsonl';
export const KV_FILE = 'kv.jsonl';

export interface OpenOptions {
  /** Reload on changes made by other processes. */
  watch?: boolean;
  /**
   * This process is the store's one writer (the server): DATA gets its owner marker (refused when
   * another live process holds it), and other processes' changes arrive as requests (onRequest).
   */
  owner?: boolean;
  /** Only read an existing file: nothing is created, migrated on disk, swept or written. */
  readOnly?: boolean;
  /** A changed file that could not be loaded (the in-memory state is kept); console.error by default. */
  onReloadError?: (err: Error) => void;
  /**
   * Something found at open that the server should log (lines of the task journal that could not be
   * read); onReloadError, else console.error, by default (the server passes its logger there).
   */
  onWarning?: (err: Error) => void;
}

/** A request from another process (the CLI): its answer is written back as `{ ok: true, ...answer }`. */
export type RequestHandler = (req: Record<string, unknown>) => Promise<Record<string, unknown>>;

export class JsonStore implements Store {
  readonly users;
  readonly sshKeys;
  readonly metas;
  readonly storages;
  /** Tasks are in a journal of their own beside the store file (task-journal.ts), opened by open(). */
  get tasks(): TaskRepo {
    return this.journal;
  }
  private journal!: TaskJournal;
  /** The key-value data (WebDAV locks and dead properties) is in a journal too (kv-journal.ts). */
  get kv(): KvRepo {
    return this.kvJournal;
  }
  private kvJournal!: KvJournal;
  readonly settings: SettingRepo;
  readonly revokedTokens: RevocationRepo;

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
  private readOnly = false;
  private releaseOwner: (() => Promise<void>) | undefined;
  private requestHandler: RequestHandler | undefined;
  private readonly taking = new Set<string>();
  /** Bumped each time a failed write put memory back to the file (revert). */
  private epoch = 0;

  private constructor(readonly file: string) {
    this.adapter = new AtomicJsonFile<StoreData>(file);
    this.db = new Low<StoreData>(this.adapter, emptyData());
    this.users = this.repo('users');
    this.sshKeys = this.repo('sshKeys');
    this.metas = this.repo('metas');
    this.storages = this.repo('storages');
    this.settings = this.settingRepo();
    this.revokedTokens = this.revocationRepo();
  }

  /**
   * Open (or create) the store file. A file that is not valid JSON, has the wrong shape or a newer
   * schema is refused with an error naming it, and left untouched.
   */
  static async open(file: string, opts: OpenOptions = {}): Promise<JsonStore> {
    const s = new JsonStore(file);
    s.readOnly = opts.readOnly ?? false;
    if (opts.owner) s.releaseOwner = await claimOwner(dirname(file), 'server');
    try {
      if (!s.readOnly) await s.sweepTempFiles();
      const raw = await s.adapter.read();
      if (s.adapter.lastText === undefined) {
        if (s.readOnly) throw new Error(`${file} does not exist`);
        s.db.data = emptyData();
      } else {
        s.db.data = validate(raw, file);
      }
      const before = s.db.data.schema_version;
      s.db.data = migrate(s.db.data);
      if (!s.readOnly && (before !== SCHEMA_VERSION || s.adapter.lastText === undefined)) await s.flush();
      const warn = opts.onWarning ?? opts.onReloadError ?? ((e: Error) => console.error(`treegate: ${e.message}`));
      s.journal = await TaskJournal.open(join(dirname(file), TASKS_FILE), { readOnly: s.readOnly });
      reportDamage(s.journal.journal, 'task changes', warn);
      s.kvJournal = await KvJournal.open(join(dirname(file), KV_FILE), { readOnly: s.readOnly });
      reportDamage(s.kvJournal.journal, 'WebDAV locks and properties', warn);
      if (!s.readOnly && (s.db.data.tasks.length || Object.keys(s.db.data.kv).length)) {
        // What an older version kept in the store moves to the journals, written there first: a
        // crash before the store is written moves it again, and what is there already is kept.
        await s.journal.adopt(s.db.data.tasks);
        await s.kvJournal.adopt(s.db.data.kv);
        s.db.data.tasks = [];
        s.db.data.kv = {};
        await s.flush();
      }
      if (opts.watch && !s.readOnly) s.startWatching(opts.onReloadError ?? ((e) => console.error(`treegate: ${e.message}`)));
    } catch (e) {
      await s.journal?.close();
      await s.kvJournal?.close();
      await s.releaseOwner?.();
      throw e;
    }
    return s;
  }

  /**
   * Serve other processes' requests (owner stores only): each `control-<id>.request` file in DATA is
   * taken (deleted), given to `handler`, and answered in `control-<id>.result`. Requests already
   * waiting are served now.
   */
  onRequest(handler: RequestHandler): void {
    this.requestHandler = handler;
    void readdir(dirname(this.file)).then(
      (names) => names.filter((n) => REQUEST_RE.test(n)).forEach((n) => void this.takeRequest(n)),
      () => undefined,
    );
  }

  private async takeRequest(name: string): Promise<void> {
    const handler = this.requestHandler;
    const m = REQUEST_RE.exec(name);
    if (!handler || !m || this.taking.has(name)) return;
    this.taking.add(name);
    const file = join(dirname(this.file), name);
    try {
      let req: Record<string, unknown>;
      try {
        // DATA is 0700; still, only a regular file of our own user is a request.
        const st = await lstat(file);
        if (!st.isFile() || (process.getuid && st.uid !== process.getuid())) return void (await rm(file, { force: true }));
        req = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
        await rm(file);
      } catch {
        return; // gone (taken, or withdrawn by its sender), or torn: nothing to answer
      }
      let answer: Record<string, unknown>;
      try {
        answer = { ...(await handler(req)), ok: true };
      } catch (e) {
        answer = { ok: false, error: e instanceof Error ? e.message : String(e) };
      }
      await new AtomicJsonFile<object>(join(dirname(this.file), resultName(m[1]!))).write(answer).catch(() => undefined);
    } finally {
      this.taking.delete(name);
    }
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
    this.requestHandler = undefined;
    await this.chain;
    await this.journal?.close();
    await this.kvJournal?.close();
    await this.releaseOwner?.();
    this.releaseOwner = undefined;
  }

  /** Persist the current in-memory state; resolves when it is durable. */
  flush(): Promise<void> {
    if (this.scheduled) return this.scheduled;
    if (this.readOnly) return Promise.reject(new Error(`${this.file} is open read-only`));
    const epoch = this.epoch;
    const p = this.chain.then(async () => {
      this.scheduled = null;
      // Changes made while the previous write was in flight wait for this one; when that write
      // failed, revert took them out of memory with its own, and they fail with it.
      if (epoch !== this.epoch) throw new Error(`${this.file}: not saved: the write before it failed`);
      this.db.data.writer = this.instanceId;
      try {
        await this.db.write();
      } catch (e) {
        this.revert();
        throw e;
      }
    });
    this.scheduled = p;
    this.chain = p.catch(() => undefined);
    return p;
  }

  /**
   * After a failed write: memory goes back to what the file holds (the last state read or written),
   * and what was derived from it is dropped, as after an external change. Every change since that
   * state was written is in the failed write or waits for the next one, and each caller gets an error.
   */
  private revert(): void {
    this.epoch++;
    const text = this.adapter.lastText;
    this.db.data = migrate(text === undefined ? emptyData() : validate(JSON.parse(text), this.file));
    for (const c of Object.keys(this.revisions) as Collection[]) this.revisions[c]++;
    for (const l of this.listeners) l();
  }

  /**
   * Remove temp files a killed writer left in DATA. Only those of dead processes: the name carries the
   * writer's pid, and a live writer's temp file is a write in flight (`<file>.<pid>.<n|uuid>.tmp`,
   * atomic-file.ts, journal.ts, owner.ts). Every file written that way in DATA is covered, not only
   * the store's: a kill -9 during a first start's config.json, a claim's server.pid or a CLI
   * request's (or the server's answer's) write left one that nothing ever removed. Only these names.
   */
  private async sweepTempFiles(): Promise<void> {
    const dir = dirname(this.file);
    const names = await readdir(dir).catch(() => [] as string[]);
    const own = new Set([basename(this.file), TASKS_FILE, KV_FILE, OWNER_FILE, 'config.json']);
    const stale = names.filter((n) => {
      const m = TEMP_NAME.exec(n);
      if (!m || !(own.has(m[1]!) || CONTROL_NAME.test(m[1]!))) return false;
      const pid = Number(m[2]);
      return pid !== process.pid && !isAlive(pid);
    });
    // A stale owner marker set aside (owner.ts removeStale) is removed there at once; one a kill left
    // has no pid to check, so only an old one goes (a claim under way holds its own for a moment).
    const now = Date.now();
    for (const n of names.filter((n) => STALE_MARKER.test(n))) {
      const st = await lstat(join(dir, n)).catch(() => undefined);
      if (st && now - st.mtimeMs > STALE_MARKER_AGE_MS) stale.push(n);
    }
    await Promise.all(stale.map((n) => rm(join(dir, n), { force: true })));
  }

  private startWatching(onError: (err: Error) => void): void {
    // Watch the directory, not the file: every write replaces the file (a rename onto its name),
    // and a watch on the file itself follows the old inode and goes deaf after the first one.
    const name = basename(this.file);
    let timer: NodeJS.Timeout | undefined;
    const refused = (e: unknown) =>
      onError(new Error(`${e instanceof Error ? e.message : String(e)}; not loaded: the state in memory is kept, and the next write replaces the file`));
    const reload = async (retry: boolean) => {
      const previous = this.adapter.lastText;
      const fresh = new AtomicJsonFile<StoreData>(this.file);
      let next: unknown;
      try {
        next = await fresh.read(previous);
      } catch (e) {
        // Perhaps a partial view of a non-atomic write: look once more before calling it broken.
        if (retry) timer = setTimeout(() => void reload(false).catch(refused), 250);
        else refused(e);
        return;
      }
      if (fresh.lastText === undefined || fresh.lastText === previous) return; // removed, or unchanged
      // Our own writes (possibly an older one, seen late) are never "external".
      if (next && (next as StoreData).writer === this.instanceId) return;
      const data = migrate(validate(next, this.file));
      this.db.data = data;
      this.adapter.lastText = fresh.lastText;
      for (const c of Object.keys(this.revisions) as Collection[]) this.revisions[c]++;
      for (const l of this.listeners) l();
    };
    this.watcher = watch(dirname(this.file), { persistent: false }, (_event, filename) => {
      if (filename && REQUEST_RE.test(filename)) return void this.takeRequest(filename);
      if (filename !== name) return;
      clearTimeout(timer);
      timer = setTimeout(() => void reload(true).catch(refused), 30); // a burst of events is one change
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
        if (id > 0 && all.some((r) => r.id === id)) throw new VfsError('EXISTS', `UNIQUE constraint failed: ${TABLE[name]}.id`);
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
      countOf: async (uid) => this.db.data.revokedTokens.reduce((n, t) => (t.uid === uid ? n + 1 : n), 0),
      purge: async (nowSec) => {
        const before = this.db.data.revokedTokens.length;
        this.db.data.revokedTokens = this.db.data.revokedTokens.filter((t) => t.exp >= nowSec);
        if (this.db.data.revokedTokens.length !== before) await this.flush();
      },
      idsOf: async (uid) => this.db.data.revokedTokens.filter((t) => t.uid === uid).map((t) => t.id),
      drop: async (ids) => {
        const gone = new Set(ids);
        const before = this.db.data.revokedTokens.length;
        this.db.data.revokedTokens = this.db.data.revokedTokens.filter((t) => !gone.has(t.id));
        if (this.db.data.revokedTokens.length !== before) await this.flush();
      },
    };
  }
}

/** Lines of a journal that could not be read are skipped, not refused (journal.ts), but never silently. */
function reportDamage(j: Journal<unknown>, what: string, warn: (e: Error) => void): void {
  const { damaged, keptAs } = j;
  if (!damaged.length) return;
  const where = damaged.length > 5 ? `${damaged.slice(0, 5).join(', ')}… (${damaged.length} lines)` : damaged.join(', ');
  warn(new Error(`${j.file}: ${damaged.length > 1 ? 'lines' : 'line'} ${where} could not be read; the ${what} on them are lost${keptAs ? ` (the file as found is kept in ${keptAs})` : ''}`));
}
