/**
 * The search index's SQLite file (DATA/search.db, WAL): one row per indexed entry, an FTS5 trigram
 * index over the folded name for substring keywords of 3+ characters, and the state of the build
 * job so that a restart resumes it.
 *
 * - entries: `parent` is the absolute virtual path of the folder ('/' for the root). A subtree is
 *   `parent = P OR parent in [P + '/', P + '0')` (`0` follows `/` in byte order), a range on the
 *   (parent, lname, name) index — also what short keywords scan (the index covers that scan, so it
 *   reads no table rows until the page itself). That one index also keeps (parent, name) unique:
 *   lname is a function of name. Every index is written for every row, and a second one for
 *   uniqueness alone made row writes ~20% dearer.
 * - names is an external-content FTS5 table over entries.lname (detail=full: phrase queries are
 *   exact substring matches, so no second check is needed), kept in sync by triggers for updates
 *   and deletes and by the store itself for inserts (see the DDL). The
 *   tokenizer is case sensitive because lname is already folded (text.ts), so both sides fold alike.
 *   columnsize=0: no per-row size record (only ranking functions read it, and results are ordered
 *   by name).
 * - queue holds folders still to list for the running job; state holds the job and its progress.
 *
 * The layout has a version (user_version = FORMAT); a file of another version is replaced by an
 * empty one, which the service then rebuilds (the index is derived data).
 */
import Database from 'better-sqlite3';
import { chmodSync, closeSync, openSync, rmSync } from 'node:fs';

export type Db = Database.Database;

const DDL = `
CREATE TABLE IF NOT EXISTS entries (
  id INTEGER PRIMARY KEY,
  parent TEXT NOT NULL,
  name TEXT NOT NULL,
  lname TEXT NOT NULL,
  is_dir INTEGER NOT NULL,
  size INTEGER NOT NULL,
  UNIQUE (parent, lname, name)
);
CREATE VIRTUAL TABLE IF NOT EXISTS names USING fts5(
  lname, content='entries', content_rowid='id', tokenize='trigram case_sensitive 1', detail='full', columnsize=0
);
-- Leaf pages twice FTS5's default (4050 bytes; they fit the file's 16 KiB pages): fewer, fuller
-- leaves made row writes ~10% cheaper. A setting of the table, stored with it.
INSERT INTO names(names, rank) VALUES ('pgsz', 8000);
-- No insert trigger: an FTS5 write inside a trigger flushes FTS5's pending terms as a segment of
-- its own each time, which made every inserted row ~6x dearer; the store indexes inserted rows
-- itself with one INSERT … SELECT per operation (IndexStore.indexNew).
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

/** Settings of every connection to the file (the build's writer thread opens its own, writer.ts). */
export const CONNECTION_PRAGMAS = [
  // WAL + NORMAL: a crash loses at most the last transactions, never the file's consistency;
  // the build is resumable and the index is derived data, so that is the right trade.
  'synchronous = NORMAL',
  'cache_size = -32000',
  // Reads go through the OS page cache directly: row lookups after an FTS match are the hot path.
  'mmap_size = 1073741824',
  'temp_store = MEMORY',
];

/** The layout's version (see the top); 3: folded names (lname) fold `ς` to `σ` (text.ts). */
export const FORMAT = 3;

/**
 * Like every file in DATA, the index is 0600: it holds every file name, hidden and password-protected
 * ones too. SQLite creates a missing file 0644 (less the umask), so it is created here first (an empty
 * file is an empty database); the -wal and -shm files take the database file's mode. A file left by
 * an older version is tightened.
 */
function privateFile(file: string): void {
  closeSync(openSync(file, 'a', 0o600));
  for (const suffix of ['', '-wal', '-shm']) {
    try {
      chmodSync(file + suffix, 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}

/** A file SQLite cannot read as a database: the index is derived data, so it is built again. */
export function damaged(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT';
}

/** Settings and tables of an open file; the handle is closed when this throws. */
function setUp(db: Db): void {
  try {
    // Only takes effect on a new file (and must come before WAL): bigger pages made row writes
    // ~20% cheaper (fewer b-tree pages to split and write for the long path keys).
    db.pragma('page_size = 16384');
    db.pragma('journal_mode = WAL');
    for (const p of CONNECTION_PRAGMAS) db.pragma(p);
    createSchema(db);
    db.pragma(`user_version = ${FORMAT}`);
  } catch (err) {
    db.close(); // a failed open (a full disk) is retried every few seconds (service.ts): no handle kept per try
    throw err;
  }
}

/**
 * Open (creating or replacing) the index file; `replaced`: it held an index of another format, or
 * was no database at all, or was damaged (also `discard`: the caller found it damaged while in use).
 * The index is derived data: a file zeroed by a power cut or cut short by a full disk is built
 * again. Opened as it was, it threw on every start, after the ready line, and the whole server
 * exited (1), to be restarted by systemd into the same crash. A file whose first page reads but
 * whose FTS tables do not (a damaged page) failed in setting up instead, on every try: search
 * stayed unavailable until someone deleted the file by hand.
 */
export function openIndexDb(file: string, discard = false): { db: Db; replaced: boolean } {
  privateFile(file);
  let db = new Database(file);
  let replaced = discard;
  if (!replaced) {
    try {
      const used = db.prepare(`SELECT count(*) FROM sqlite_master`).pluck().get() !== 0;
      replaced = used && db.pragma('user_version', { simple: true }) !== FORMAT;
      if (!replaced) setUp(db);
    } catch (err) {
      if (db.open) db.close();
      if (!damaged(err)) throw err;
      replaced = true;
    }
  }
  if (replaced) {
    if (db.open) db.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true });
    privateFile(file);
    db = new Database(file);
    setUp(db);
  }
  return { db, replaced };
}

/** Create whatever tables and triggers are missing. */
export function createSchema(db: Db): void {
  db.exec(DDL);
}
