/**
 * The search service the server builds and closes: a persistent name index (SQLite FTS5, see
 * schema.ts) of the whole virtual tree, kept current by VFS change events and storage watches,
 * answering AList's fs/search with the caller's own access rules applied (query.ts).
 *
 * It follows the `search_index` setting: `none` (or empty) closes the index and every call answers
 * NOT_SUPPORTED `search not available`; any other kind (`database`, `database_non_full_text`,
 * `bleve`, `meilisearch`) is served by this one engine, whose results are AList's `database` ones.
 * The setting is re-read on every call and every few seconds, since settings have no change event.
 */
import { join as joinPath } from 'node:path';
import type { Logger } from 'pino';
import { can, type AccessContext } from '../auth/principal.js';
import { VfsError } from '../errors.js';
import { isWithin, join, normalize } from '../paths.js';
import type { Settings } from '../settings/settings.js';
import type { MetaRules } from '../vfs/meta.js';
import type { MountTable } from '../vfs/mounts.js';
import type { Vfs } from '../vfs/vfs.js';
import { IndexBuilder, type IndexProgress } from './builder.js';
import { SearchQueries, type OfflineStorage, type SearchPage } from './query.js';
import { IndexScope } from './scope.js';
import { damaged } from './schema.js';
import { IndexStore } from './store.js';
import { boundedKeywords } from './text.js';
import { IndexUpdater } from './updater.js';

export const NOT_AVAILABLE = 'search not available';

export interface SearchServiceDeps {
  dataDir: string;
  settings: Settings;
  vfs: Vfs;
  mounts: MountTable;
  rules: MetaRules;
  log: Logger;
  /** How often the setting is re-checked in the background (ms); 3 s by default. */
  syncMs?: number;
}

export interface SearchRequest {
  /** Folder to search, a user path (joined to the caller's base path). */
  parent: string;
  keywords: string;
  scope: number;
  /** Both ≥ 1 (the REST layer answers AList's messages otherwise). */
  page: number;
  perPage: number;
}

export interface BuildRequest {
  /** Folders to (re)index; `/` by default. */
  paths?: string[];
  /** Levels below each path; absent or 0 → `max_index_depth`; negative → unlimited. */
  maxDepth?: number;
  ignorePaths?: string[];
  /** Drop the whole index first (the default when no paths are given). */
  clear?: boolean;
}

/** The open index and its helpers, present only while search is on. */
interface Engine {
  store: IndexStore;
  queries: SearchQueries;
  builder: IndexBuilder;
  updater: IndexUpdater;
  unsubscribe: Array<() => void>;
}

export class SearchService {
  private engine: Engine | undefined;
  private closing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Opening the index failed (and was logged); cleared once it opens. */
  private openFailed = false;
  /** Nothing opens before start(): a resumed build needs the storages loaded. */
  private started = false;
  /** The open file was found damaged (see use): the next open replaces it. */
  private discard = false;
  private readonly scope: IndexScope;

  constructor(private readonly deps: SearchServiceDeps) {
    this.scope = new IndexScope(deps.settings, deps.mounts);
  }

  /** Open the index if search is on (resuming an unfinished build) and follow the setting. */
  start(): void {
    if (this.closed || this.started) return;
    this.started = true;
    this.sync();
    this.timer = setInterval(() => this.sync(), this.deps.syncMs ?? 3000);
    this.timer.unref();
  }

  /** The setting asks for search (whether or not the index is open yet). */
  get enabled(): boolean {
    const kind = this.deps.settings.get('search_index');
    return kind !== '' && kind !== 'none';
  }

  /** Bring the engine in line with the setting. */
  sync(): void {
    if (this.closed || !this.started) return;
    if (this.enabled && !this.engine && !this.closing) {
      try {
        this.engine = this.open();
        this.openFailed = false;
      } catch (err) {
        // The index is an extra: one that cannot be opened (search.db left unreadable, owned by
        // root after one `sudo treegate server`) leaves search unavailable, not the server down.
        // This runs at start, after the ready line, and every few seconds: thrown, it ended the
        // process (exit 1), and systemd restarted it into the same crash. Logged once, retried.
        if (!this.openFailed) this.deps.log.error({ err }, 'search index: cannot open search.db; search is unavailable');
        this.openFailed = true;
      }
    } else if (!this.enabled && this.engine) void this.shut();
  }

  private open(): Engine {
    const { vfs, mounts, settings, log } = this.deps;
    const store = new IndexStore(joinPath(this.deps.dataDir, 'search.db'), this.discard);
    this.discard = false;
    const builder = new IndexBuilder(store, vfs, this.scope, log.child({ svc: 'search' }));
    const updater = new IndexUpdater(store, this.scope, builder, settings, vfs, log.child({ svc: 'search' }));
    const unsubscribe = [
      vfs.onChange((c) => updater.onVfsChange(c)),
      mounts.watch((c) => updater.onOutsideChange(c.vpath), (m) => this.scope.storageIndexed(m)),
    ];
    builder.resume();
    const engine: Engine = { store, queries: new SearchQueries(store.db), builder, updater, unsubscribe };
    if (store.replaced) {
      // An index of an older format was dropped (schema.ts): build it again rather than leave search empty.
      log.info('search index: file of an older format (or no database at all) replaced, rebuilding');
      builder.start({ kind: 'build', paths: ['/'], maxDepth: this.depthOf(undefined), ignore: [] });
    }
    return engine;
  }

  private shut(): Promise<void> {
    const e = this.engine;
    if (!e) return Promise.resolve();
    this.engine = undefined;
    this.closing = (async () => {
      for (const u of e.unsubscribe) u();
      await e.builder.close();
      await e.updater.close();
      e.store.close();
    })().finally(() => (this.closing = undefined));
    return this.closing;
  }

  private on(): Engine {
    this.sync();
    if (!this.engine) throw new VfsError('NOT_SUPPORTED', NOT_AVAILABLE);
    return this.engine;
  }

  /**
   * Run `fn` on the open index. A page of the file found damaged (SQLITE_CORRUPT: opening reads
   * only the first pages, schema.ts) fails this call, and the file is then replaced and rebuilt, as
   * a damaged file is at open. Before, every search and every index call (clear and build too)
   * failed alike until someone deleted search.db by hand.
   */
  private use<T>(e: Engine, fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (damaged(err) && this.engine === e) {
        this.deps.log.error({ err }, 'search index: search.db is damaged; it is replaced and rebuilt');
        this.discard = true;
        // Reopened (replacing the file) by the next sync, this one or the timer's.
        void this.shut().then(() => this.sync(), () => undefined);
      }
      throw err;
    }
  }

  /** fs/search: entries below `parent` whose names hold every keyword, as this caller may see them. */
  async search(ctx: AccessContext, req: SearchRequest): Promise<SearchPage> {
    const e = this.on();
    const kw = boundedKeywords(req.keywords);
    if ('error' in kw) throw new VfsError('INVALID', kw.error);
    const root = join(ctx.principal.basePath, req.parent || '/');
    const p = ctx.principal;
    let access = can.seeHidden(p) && can.skipPassword(p) ? undefined : await this.deps.rules.accessChecker(p, ctx.password);
    if (access && access.guarded.length === 0) access = undefined;
    if (this.engine !== e) throw new VfsError('NOT_SUPPORTED', NOT_AVAILABLE); // switched off meanwhile
    return this.use(e, () => e.queries.run(
      // offset: past 2^53 it is inexact, and the query clamps it (an empty page with the total).
      { root, keywords: kw.keywords, scope: req.scope, offset: (req.page - 1) * req.perPage, limit: req.perPage, offline: this.offline() },
      access,
    ));
  }

  /**
   * Disabled storages, as the mount table has them now: their rows stay in the index (enabling the
   * storage brings them back at once) but are not answered, as fs/get and listings do not serve
   * them either. A storage whose init failed keeps its rows visible: that is usually passing.
   */
  private offline(): OfflineStorage[] {
    const all = this.scope.mountPaths();
    return this.scope.offlinePaths().map((path) => ({ path, inner: all.filter((p) => p !== path && isWithin(path, p)) }));
  }

  /** admin/index/build: (clear and) index the tree in the background. */
  build(req: BuildRequest = {}): void {
    const e = this.on();
    if (e.builder.running) throw new VfsError('INVALID', 'index is running');
    const paths = (req.paths?.length ? req.paths : ['/']).map(normalize);
    // Checked before anything is dropped: a bad ignore path refused the build after clearing the index.
    const ignore = (req.ignorePaths ?? []).map(normalize);
    this.use(e, () => {
      if (req.clear ?? !req.paths?.length) e.store.clear();
      else for (const p of paths) e.store.removeTree(p);
      e.builder.start({ kind: 'build', paths, maxDepth: this.depthOf(req.maxDepth), ignore });
    });
  }

  /** admin/index/update: re-index some folders (their old entries are dropped first). */
  update(paths: string[], maxDepth?: number): void {
    const e = this.on();
    if (e.builder.running) throw new VfsError('INVALID', 'index is running');
    const list = (paths.length ? paths : ['/']).map(normalize);
    this.use(e, () => {
      for (const p of list) e.store.removeTree(p);
      e.builder.start({ kind: 'update', paths: list, maxDepth: this.depthOf(maxDepth), ignore: [] });
    });
  }

  private depthOf(requested: number | undefined): number {
    if (requested !== undefined && requested < 0) return -1;
    if (requested) return Math.floor(requested);
    const d = this.scope.maxDepth();
    return Number.isFinite(d) ? d : -1;
  }

  async stop(): Promise<void> {
    await this.on().builder.stop();
  }

  clear(): void {
    const e = this.on();
    if (e.builder.running) throw new VfsError('INVALID', 'index is running');
    this.use(e, () => {
      e.store.clear();
      e.store.setState('progress', { obj_count: 0, is_done: false, last_done_time: null, error: '' } satisfies IndexProgress);
    });
  }

  progress(): IndexProgress {
    const e = this.on();
    return this.use(e, () => e.builder.progress());
  }

  /** True while a build or update job runs. */
  get running(): boolean {
    return !!this.engine?.builder.running;
  }

  /** Wait until pending outside changes are applied (tests, and a clean shutdown). */
  async settle(): Promise<void> {
    await this.engine?.updater.flush();
  }

  /** Stop following the setting, pause a running build (it resumes on the next start), close the file. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.shut();
    await this.closing;
  }
}
