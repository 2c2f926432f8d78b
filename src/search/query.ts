/**
 * One search as SQL: keywords, subtree, scope, paging and the caller's access rules, counted and
 * paged by SQLite so that no more than one page of rows ever reaches JavaScript.
 *
 * Plan: keywords of 3+ characters go to the FTS5 trigram index as phrases (ANDed); shorter ones
 * are `instr` checks on the folded name. Below a folder, when the subtree is small next to the
 * keyword's matches, every keyword is an `instr` check over the subtree's range of the covering
 * (parent, lname, name) index instead — that is how short keywords are served too. Access rules: rows
 * outside every guarded rule's subtree are visible without further thought (pure SQL); rows inside
 * one are asked of the VFS's own canAccess through a SQL function, so `total` is exactly what the
 * caller may see and meta rules are evaluated by the VFS alone. Rows of storages that are not served
 * (disabled) are left out the same way, by what the mount table says at query time (`offline`).
 */
import type { Statement } from 'better-sqlite3';
import { basename, isWithin, parent, segments } from '../paths.js';
import type { AccessChecker } from '../vfs/meta.js';
import type { Db } from './schema.js';
import { below, type IndexRow } from './store.js';
import { indexable, phrase, TRIGRAM } from './text.js';

export interface SearchQuery {
  /** Absolute virtual path of the folder searched (results lie below it, at any depth). */
  root: string;
  /** Folded keywords (text.ts); all must occur in the name. */
  keywords: readonly string[];
  /** 0 everything, 1 folders, anything else files (AList). */
  scope: number;
  offset: number;
  limit: number;
  /** Storages not served now (disabled): the rows they own are left out. */
  offline?: readonly OfflineStorage[];
}

/**
 * A storage whose rows are left out: those at and below `path`, except what lies at or below
 * `inner`, the mount paths of the storages mounted inside it (a row belongs to the longest mount
 * path holding it, as the mount table resolves it; each inner storage is judged on its own).
 */
export interface OfflineStorage {
  path: string;
  inner: readonly string[];
}

/** Rows owned by one of `offline` (see OfflineStorage), for the JS fallback of many storages. */
function ownedBy(offline: readonly OfflineStorage[], vpath: string): boolean {
  return offline.some((o) => isWithin(o.path, vpath) && !o.inner.some((i) => isWithin(i, vpath)));
}

/**
 * SQLite binds integers as 64-bit; an offset past this (page × per_page of absurd sizes) can never
 * reach a row anyway, and past 2^63 it is not an integer to SQLite at all (SQLITE_MISMATCH).
 */
const MAX_ROWS = Number.MAX_SAFE_INTEGER;

export interface SearchPage {
  hits: IndexRow[];
  total: number;
}

/** Past this many guarded rules inside the searched subtree, every row is simply asked. */
const MAX_GUARD_TERMS = 64;
const STATEMENT_CACHE = 128;
/** Rows scanned per FTS match looked up, at equal cost (measured on 1M entries; see bench/search.mjs). */
const SCAN_COST_RATIO = 4;

/** The keyword's three-character windows (code points), as the trigram tokenizer cuts them. */
function trigrams(k: string): string[] {
  const cps = [...k];
  const out: string[] = [];
  for (let i = 0; i + TRIGRAM <= cps.length; i++) out.push(cps.slice(i, i + TRIGRAM).join(''));
  return out;
}

export class SearchQueries {
  private check: AccessChecker | undefined;
  private offline: readonly OfflineStorage[] | undefined;
  private readonly statements = new Map<string, Statement>();

  constructor(private readonly db: Db) {
    // Reads `this.check`, set only for the duration of one synchronous query in run().
    db.function('tg_visible', { deterministic: false }, (p: unknown, name: unknown) => {
      const c = this.check;
      if (!c) return 1;
      return c.canAccess(p === '/' ? `/${String(name)}` : `${String(p)}/${String(name)}`) ? 1 : 0;
    });
    // Likewise `this.offline`, when too many storages are offline for plain SQL terms.
    db.function('tg_offline', { deterministic: false }, (p: unknown, name: unknown) => {
      const o = this.offline;
      if (!o) return 0;
      return ownedBy(o, p === '/' ? `/${String(name)}` : `${String(p)}/${String(name)}`) ? 1 : 0;
    });
  }

  private prepare(sql: string): Statement {
    let s = this.statements.get(sql);
    if (!s) {
      if (this.statements.size >= STATEMENT_CACHE) this.statements.clear();
      s = this.db.prepare(sql);
      this.statements.set(sql, s);
    }
    return s;
  }

  /** `access` undefined: no rule can deny anything (see-hidden and skip-password). */
  run(query: SearchQuery, access?: AccessChecker): SearchPage {
    // No name holds NUL (every surface refuses it), and FTS5 cannot parse a phrase holding one.
    if (query.keywords.some((k) => k.includes('\0'))) return { hits: [], total: 0 };
    const q = { ...query, offset: Math.min(query.offset, MAX_ROWS), limit: Math.min(query.limit, MAX_ROWS) };
    const long = q.keywords.filter(indexable);
    const sub = below(q.root, 'e.parent');
    const useIndex = long.length > 0 && this.indexPays(long, sub);
    const params: unknown[] = [];
    let from = 'entries e';
    const where: string[] = [];
    if (useIndex) {
      from = 'names JOIN entries e ON e.id = names.rowid';
      where.push('names MATCH ?');
      params.push(long.map(phrase).join(' AND '));
    }
    for (const k of useIndex ? q.keywords.filter((k) => !indexable(k)) : q.keywords) {
      where.push('instr(e.lname, ?) > 0');
      params.push(k);
    }
    if (sub.params.length) {
      where.push(sub.sql);
      params.push(...sub.params);
    }
    if (q.scope !== 0) where.push(q.scope === 1 ? 'e.is_dir = 1' : 'e.is_dir = 0');
    const offline = (q.offline ?? []).filter((o) => isWithin(o.path, q.root) || isWithin(q.root, o.path));
    const off = offline.length ? this.offlineTerms(offline) : undefined;
    if (off) {
      where.push(off.sql);
      params.push(...off.params);
    }
    const guard = access && this.guard(q.root, access.guarded);
    if (guard) {
      where.push(guard.sql);
      params.push(...guard.params);
    }
    const cond = where.length ? where.join(' AND ') : '1';
    const page = `SELECT e.parent, e.name, e.is_dir, e.size FROM ${from} WHERE ${cond} ORDER BY e.name, e.parent LIMIT ? OFFSET ?`;
    const count = `SELECT count(*) FROM ${from} WHERE ${cond}`;
    this.check = access;
    this.offline = offline;
    try {
      // Usually one pass: a window count rides along with the page. A scan of the whole index can
      // match most rows, and materialising them for the window costs more than counting twice.
      if (!useIndex && sub.params.length === 0) {
        const total = this.prepare(count).pluck().get(...params) as number;
        return { hits: total > q.offset ? this.rows(page, params, q).map(({ total: _, ...hit }) => hit) : [], total };
      }
      const rows = this.rows(page.replace(' FROM ', ', count(*) OVER () AS total FROM '), params, q);
      const total = rows.length ? rows[0]!.total! : q.offset === 0 ? 0 : (this.prepare(count).pluck().get(...params) as number);
      return { hits: rows.map(({ total: _, ...hit }) => hit), total };
    } finally {
      this.check = undefined;
      this.offline = undefined;
    }
  }

  private rows(sql: string, params: unknown[], q: SearchQuery): Array<IndexRow & { total?: number }> {
    const rows = this.prepare(sql).all(...params, q.limit, q.offset) as Array<{ parent: string; name: string; is_dir: number; size: number; total?: number }>;
    return rows.map((r) => ({ parent: r.parent, name: r.name, isDir: r.is_dir === 1, size: r.size, total: r.total }));
  }

  /**
   * Is the trigram index cheaper than scanning the subtree? Every FTS match costs a row lookup,
   * a scanned row only a step along the (parent, lname) index, so the index pays when the subtree
   * holds several times more rows than the keyword's rarest trigram. At the root it always pays.
   */
  private indexPays(long: readonly string[], sub: { sql: string; params: string[] }): boolean {
    if (sub.params.length === 0) return true;
    let est = Infinity;
    const docs = this.prepare('SELECT doc FROM names_vocab WHERE term = ?').pluck();
    for (const k of long) for (const t of trigrams(k)) est = Math.min(est, (docs.get(t) as number | undefined) ?? 0);
    if (est === 0) return true;
    const cap = est * SCAN_COST_RATIO;
    const size = this.prepare(`SELECT count(*) FROM (SELECT 1 FROM entries e WHERE ${sub.sql} LIMIT ?)`).pluck().get(...sub.params, cap) as number;
    return size >= cap;
  }

  /** The condition leaving out the rows of `offline` storages (see OfflineStorage). */
  private offlineTerms(offline: readonly OfflineStorage[]): { sql: string; params: unknown[] } {
    if (offline.reduce((n, o) => n + 1 + o.inner.length, 0) > MAX_GUARD_TERMS) return { sql: 'NOT tg_offline(e.parent, e.name)', params: [] };
    const terms: string[] = [];
    const params: unknown[] = [];
    /** The row at `p` and every row below it. */
    const tree = (p: string): string => {
      if (segments(p).length === 0) return '1';
      const b = below(p, 'e.parent');
      params.push(parent(p), basename(p), ...b.params);
      return `((e.parent = ? AND e.name = ?) OR ${b.sql})`;
    };
    for (const o of offline) terms.push(`NOT (${[tree(o.path), ...o.inner.map((i) => `NOT ${tree(i)}`)].join(' AND ')})`);
    return { sql: terms.join(' AND '), params };
  }

  /** The access condition for rows below `root`, or undefined when no rule there can deny. */
  private guard(root: string, guarded: readonly string[]): { sql: string; params: unknown[] } | undefined {
    const ask = 'tg_visible(e.parent, e.name)';
    if (guarded.some((g) => isWithin(g, root))) return { sql: ask, params: [] };
    const inside = guarded.filter((g) => isWithin(root, g));
    if (inside.length === 0) return undefined;
    if (inside.length > MAX_GUARD_TERMS) return { sql: ask, params: [] };
    const terms: string[] = [];
    const params: unknown[] = [];
    for (const g of inside) {
      const b = below(g, 'e.parent');
      terms.push(`(e.parent = ? AND e.name = ?) OR ${b.sql}`);
      params.push(segments(g).length ? parent(g) : '/', basename(g), ...b.params);
    }
    return { sql: `(NOT (${terms.join(' OR ')}) OR ${ask})`, params };
  }
}
