/**
 * The search index's SQLite file (DATA/search.db, WAL): one row per indexed entry, an FTS5 trigram
 * index over the folded name for substring keywords of 3+ characters, and the state of the build
 * job so that a restart resumes it.
 *
 * - entries(parent, name) is unique; `parent` is the absolute virtual path of the folder ('/' for
 *   the root). A subtree is `parent = P OR parent in [P + '/', P + '0')` (`0` follows `/` in byte
 *   order), a range on the (parent, …) indexes — also what short keywords scan (entries_scan covers
 *   that scan, so it reads no table rows until the page itself).
 * - names is an external-content FTS5 table over entries.lname (detail=full: phrase queries are
 *   exact substring matches, so no second check is needed), kept in sync by triggers for updates
 *   and deletes and by the store itself for inserts (see the DDL). The
 *   tokenizer is case sensitive because lname is already folded (text.ts), so both sides fold alike.
 * - queue holds folders still to list for the running job; state holds the job and its progress.
 */
import Database from 'better-sqlite3';

export type Db = Database.Database;

const DDL = `
CREATE TABLE IF NOT EXISTS entries (
  id INTEGER PRIMARY KEY,
  parent TEXT NOT NULL,
  name TEXT NOT NULL,
  lname TEXT NOT NULL,
  is_dir INTEGER NOT NULL,
  size INTEGER NOT NULL,
  UNIQUE (parent, name)
);
-- Covers what a short-keyword scan of a subtree reads (count and filters) without a row lookup each.
CREATE INDEX IF NOT EXISTS entries_scan ON entries (parent, lname, is_dir);
CREATE VIRTUAL TABLE IF NOT EXISTS names USING fts5(
  lname, content='entries', content_rowid='id', tokenize='trigram case_sensitive 1', detail='full'
);
-- No insert trigger: an FTS5 write inside a trigger flushes FTS5's pending terms as a segment of
-- its own each time, which made every inserted row ~6x dearer; the store indexes inserted rows
-- itself with one INSERT … SELECT per operation (IndexStore.indexNew). Files from older versions
-- had the trigger: dropped here so rows are not indexed twice.
DROP TRIGGER IF EXISTS entries_ai;
CREATE TRIGGER IF NOT EXISTS entries_ad AFTER DELETE ON entries BEGIN
  INSERT INTO names(names, rowid, lname) VALUES ('delete', old.id, old.lname);
END;
CREATE TRIGGER IF NOT EXISTS entries_au AFTER UPDATE OF lname ON entries BEGIN
  INSERT INTO names(names, rowid, lname) VALUES ('delete', old.id, old.lname);
  INSERT INTO names(rowid, lname) VALUES (new.id, new.lname);
END;
-- Per-trigram row counts: how selective a keyword is, to choose between the index and a scan.
CREATE VIRTUAL TABLE IF NOT EXISTS names_vocab USING fts5vocab(names, row);
CREATE TABLE IF NOT EXISTS queue (
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL,
  depth INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS state (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
`;

export function openIndexDb(file: string): Db {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  // WAL + NORMAL: a crash loses at most the last transactions, never the file's consistency;
  // the build is resumable and the index is derived data, so that is the right trade.
  db.pragma('synchronous = NORMAL');
  db.pragma('cache_size = -32000');
  // Reads go through the OS page cache directly: row lookups after an FTS match are the hot path.
  db.pragma('mmap_size = 1073741824');
  db.pragma('temp_store = MEMORY');
  createSchema(db);
  return db;
}

/** Create whatever tables and triggers are missing. */
export function createSchema(db: Db): void {
  db.exec(DDL);
}
