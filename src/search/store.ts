/**
 * Row-level operations on the index file (schema.ts). Everything here is synchronous (better-sqlite3)
 * and each public method is one transaction, so a crash never leaves half an operation behind.
 * Paths are absolute virtual paths; callers decide *what* belongs in the index (scope.ts).
 */
import type { Statement } from 'better-sqlite3';
import { basename, isRootPath, isWithin, parent, segments } from '../paths.js';
import { createSchema, openIndexDb, type Db } from './schema.js';
import { fold } from './text.js';

export interface IndexRow {
  parent: string;
  name: string;
  isDir: boolean;
  size: number;
}

export interface QueuedFolder {
  id: number;
  path: string;
  depth: number;
}

/** SQL (and its parameters) selecting rows strictly below `vpath`. */
export function below(vpath: string, col = 'parent'): { sql: string; params: string[] } {
  if (isRootPath(vpath)) return { sql: '1', params: [] };
  return { sql: `(${col} = ? OR (${col} >= ? AND ${col} < ?))`, params: [vpath, vpath + '/', vpath + '0'] };
}

/**
 * The statements of a row write, shared with the build's writer thread (writer.ts), which runs
 * them on its own connection. Parameters of `upsert`: parent, name, folded name, is_dir, size.
 */
export const WRITE_SQL = {
  upsert: `INSERT INTO entries (parent, name, lname, is_dir, size) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (parent, lname, name) DO UPDATE SET is_dir = excluded.is_dir, size = excluded.size`,
  maxId: `SELECT coalesce(max(id), 0) FROM entries`,
  /** Index the rows above an id (IndexStore.indexNew). */
  indexFrom: `INSERT INTO names (rowid, lname) SELECT id, lname FROM entries WHERE id > ?`,
  enqueue: `INSERT INTO queue (id, path, depth) VALUES (?, ?, ?)`,
  dequeue: `DELETE FROM queue WHERE id = ?`,
  /** Add to the build's progress count. */
  count: `UPDATE state SET value = json_set(value, '$.obj_count', json_extract(value, '$.obj_count') + ?) WHERE key = 'progress'`,
};

/** Code points, as SQLite's length()/substr() count characters. */
const chars = (s: string) => [...s].length;

export class IndexStore {
  readonly db: Db;
  readonly file: string;
  /** The file held an index of an older format and was replaced by an empty one (schema.ts). */
  readonly replaced: boolean;
  private readonly upsertStmt: Statement;
  private readonly insertIgnoreStmt: Statement;
  private readonly deleteRowStmt: Statement;
  private readonly maxIdStmt: Statement;
  private readonly indexFromStmt: Statement;
  private readonly enqueueStmt: Statement;
  private readonly setStateStmt: Statement;

  /** `discard`: the file was found damaged in use; it is replaced by an empty one (schema.ts). */
  constructor(file: string, discard = false) {
    this.file = file;
    ({ db: this.db, replaced: this.replaced } = openIndexDb(file, discard));
    this.upsertStmt = this.db.prepare(WRITE_SQL.upsert);
    this.insertIgnoreStmt = this.db.prepare(`INSERT OR IGNORE INTO entries (parent, name, lname, is_dir, size) VALUES (?, ?, ?, 1, 0)`);
    this.deleteRowStmt = this.db.prepare(`DELETE FROM entries WHERE parent = ? AND lname = ? AND name = ?`);
    this.maxIdStmt = this.db.prepare(WRITE_SQL.maxId).pluck();
    this.indexFromStmt = this.db.prepare(WRITE_SQL.indexFrom);
    this.enqueueStmt = this.db.prepare(`INSERT INTO queue (path, depth) VALUES (?, ?)`);
    this.setStateStmt = this.db.prepare(`INSERT INTO state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  /**
   * Run `fn` in one transaction. IMMEDIATE: while a build runs, its writer thread writes through a
   * second connection, and a deferred transaction that read before that thread committed could
   * not write any more (SQLITE_BUSY_SNAPSHOT, with no wait); taking the write lock first waits
   * for the other writer's transaction instead (busy timeout).
   */
  tx<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  count(): number {
    return (this.db.prepare(`SELECT count(*) AS n FROM entries`).get() as { n: number }).n;
  }

  /**
   * Run `fn` (inside a transaction) and add the rows it inserted to the FTS index in one statement
   * (schema.ts: why there is no insert trigger). New rows are exactly those above the largest id
   * before: a rowid is always chosen above the current largest, and `fn` deletes nothing it does
   * not re-create (replace conflicts only happen on rows whose names were already indexed).
   */
  private indexNew(fn: () => void): void {
    const before = this.maxIdStmt.get() as number;
    fn();
    this.indexFromStmt.run(before);
  }

  upsert(rows: readonly IndexRow[]): void {
    if (rows.length === 0) return;
    this.tx(() => this.indexNew(() => {
      for (const r of rows) this.upsertStmt.run(r.parent, r.name, fold(r.name), r.isDir ? 1 : 0, r.isDir ? 0 : r.size);
    }));
  }

  /** Folders leading to `vpath` (root excluded), added when missing: writes create parents too. */
  ensureFolders(vpath: string): void {
    const segs = segments(vpath);
    if (segs.length < 2) return;
    this.tx(() => this.indexNew(() => {
      for (let i = 0; i < segs.length - 1; i++) {
        this.insertIgnoreStmt.run('/' + segs.slice(0, i).join('/'), segs[i]!, fold(segs[i]!));
      }
    }));
  }

  /** Remove the row at `vpath` and everything below it. */
  removeTree(vpath: string): void {
    this.tx(() => this.removeTreeNow(vpath));
  }

  /**
   * removeTree, but what lies under any of `keep` stays, with the folders leading to it (a storage
   * deleted from the tree while others are mounted inside its path).
   */
  removeTreeExcept(vpath: string, keep: readonly string[]): void {
    this.tx(() => {
      this.removeTreeKeeping(vpath, keep);
      // Folders above that only led to this storage (no storage holds or lies below them) go too.
      for (let p = parent(vpath); segments(p).length > 0; p = parent(p)) {
        if (keep.some((k) => isWithin(k, p) || isWithin(p, k))) break;
        this.deleteRow(p);
      }
    });
  }

  /** removeTreeExcept for what lies below `vpath` only: its own row and the folders above stay. */
  removeBelowExcept(vpath: string, keep: readonly string[]): void {
    this.tx(() => this.removeTreeKeeping(vpath, keep, false));
  }

  /** `self` false: the row at `vpath` stays (rows below are removed either way). */
  private removeTreeKeeping(vpath: string, keep: readonly string[], self = true): void {
    const inner = keep.filter((k) => k !== vpath && isWithin(vpath, k));
    if (!inner.length) return this.removeTreeNow(vpath, self);
    const all = below(vpath);
    const params = [...all.params];
    let sql = `DELETE FROM entries WHERE ${all.sql}`;
    for (const k of inner) {
      const b = below(k);
      sql += ` AND NOT ${b.sql}`;
      params.push(...b.params);
      // The folders from vpath down to k (k included) are still there, as the way to k.
      for (let p = k; p !== vpath; p = parent(p)) {
        sql += ' AND NOT (parent = ? AND name = ?)';
        params.push(parent(p), basename(p));
      }
    }
    this.db.prepare(sql).run(...params);
  }

  private removeTreeNow(vpath: string, self = true): void {
    if (self && segments(vpath).length > 0) this.deleteRow(vpath);
    const b = below(vpath);
    this.db.prepare(`DELETE FROM entries WHERE ${b.sql}`).run(...b.params);
  }

  private deleteRow(vpath: string): void {
    const name = basename(vpath);
    this.deleteRowStmt.run(parent(vpath), fold(name), name);
  }

  /** The subtree at `from` now lives at `to` (whatever was indexed at `to` is replaced). */
  moveTree(from: string, to: string, top: IndexRow): void {
    this.tx(() => {
      this.removeTreeNow(to);
      this.deleteRow(from);
      this.indexNew(() => this.upsertStmt.run(top.parent, top.name, fold(top.name), top.isDir ? 1 : 0, top.isDir ? 0 : top.size));
      const b = below(from);
      this.db.prepare(`UPDATE entries SET parent = ? || substr(parent, ?) WHERE ${b.sql}`).run(to, chars(from) + 1, ...b.params);
    });
  }

  /** The subtree at `from` was copied to `to`. */
  copyTree(from: string, to: string, top: IndexRow): void {
    this.tx(() => {
      this.removeTreeNow(to);
      this.indexNew(() => {
        this.upsertStmt.run(top.parent, top.name, fold(top.name), top.isDir ? 1 : 0, top.isDir ? 0 : top.size);
        const b = below(from);
        this.db
          .prepare(`INSERT OR REPLACE INTO entries (parent, name, lname, is_dir, size)
                    SELECT ? || substr(parent, ?), name, lname, is_dir, size FROM entries WHERE ${b.sql}`)
          .run(to, chars(from) + 1, ...b.params);
      });
    });
  }

  /** Remove the rows below `vpath` deeper than `maxDepth` (a top-level entry has depth 1). */
  removeDeeperThan(vpath: string, maxDepth: number): void {
    // Below a folder other than the root, a row's depth is the number of `/` in its parent plus one.
    const b = below(vpath);
    this.tx(() => this.db.prepare(`DELETE FROM entries WHERE ${b.sql} AND length(parent) - length(replace(parent, '/', '')) >= ?`).run(...b.params, maxDepth));
  }

  /**
   * Make the indexed children of `dir` exactly `rows`: vanished ones lose their subtrees too, and so
   * does a folder that is now a file (upserted, its old content would stay findable below a file).
   * What lies at or under `offline` (mount paths of disabled storages, which listings leave out) stays,
   * with the folders leading to it: their rows are kept until the storage is enabled again.
   */
  replaceChildren(dir: string, rows: readonly IndexRow[], offline: readonly string[] = []): void {
    this.tx(() => {
      const now = new Map(rows.map((r) => [r.name, r.isDir]));
      const old = this.db.prepare(`SELECT name, is_dir FROM entries WHERE parent = ?`).all(dir) as Array<{ name: string; is_dir: number }>;
      for (const { name, is_dir } of old) {
        const isDir = now.get(name);
        if (isDir === true || (isDir === false && is_dir === 0)) continue;
        const p = dir === '/' ? `/${name}` : `${dir}/${name}`;
        if (isDir === false) this.removeTreeNow(p, false);
        else if (!offline.includes(p)) this.removeTreeKeeping(p, offline);
      }
      this.upsert(rows);
    });
  }

  /** Drop every row (recreating the tables is far faster than deleting a million rows one by one). */
  clear(): void {
    this.tx(() => {
      this.db.exec(`DROP TRIGGER IF EXISTS entries_ad; DROP TRIGGER IF EXISTS entries_au;
                    DROP TABLE IF EXISTS names_vocab; DROP TABLE IF EXISTS names; DELETE FROM entries;`);
      createSchema(this.db);
    });
  }

  getState<T>(key: string): T | undefined {
    const v = this.db.prepare(`SELECT value FROM state WHERE key = ?`).pluck().get(key) as string | undefined;
    return v === undefined ? undefined : (JSON.parse(v) as T);
  }

  setState(key: string, value: unknown): void {
    this.setStateStmt.run(key, JSON.stringify(value));
  }

  /** Queue a folder for the job; its id, to take it off again. */
  enqueue(path: string, depth: number): number {
    return Number(this.enqueueStmt.run(path, depth).lastInsertRowid);
  }

  /** Every folder the job still has to list, oldest first. */
  queued(): QueuedFolder[] {
    return this.db.prepare(`SELECT id, path, depth FROM queue ORDER BY id`).all() as QueuedFolder[];
  }

  clearQueue(): void {
    this.db.exec(`DELETE FROM queue`);
  }
}
