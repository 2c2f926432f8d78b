/** The index file and its queries, without a server: keywords, scope, paging, subtrees, access guards, tree edits. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AccessChecker } from '../vfs/meta.js';
import { SearchQueries, type SearchQuery } from './query.js';
import { IndexStore, type IndexRow } from './store.js';
import { keywordsOf } from './text.js';

const file = (parent: string, name: string, size = 1): IndexRow => ({ parent, name, isDir: false, size });
const dir = (parent: string, name: string): IndexRow => ({ parent, name, isDir: true, size: 0 });

let tmp: string;
let store: IndexStore;
let q: SearchQueries;

function search(keywords: string, o: Partial<SearchQuery> = {}, access?: AccessChecker) {
  return q.run({ root: '/', keywords: keywordsOf(keywords), scope: 0, offset: 0, limit: 100, ...o }, access);
}
const names = (r: { hits: IndexRow[] }) => r.hits.map((h) => h.name);
const paths = (r: { hits: IndexRow[] }) => r.hits.map((h) => (h.parent === '/' ? '' : h.parent) + '/' + h.name);

beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'tg-search-'));
  store = new IndexStore(join(tmp, 'search.db'));
  q = new SearchQueries(store.db);
  store.upsert([
    dir('/', 'docs'), dir('/', 'ab'), dir('/', 'abc'),
    file('/docs', 'Report Final.PDF', 10), file('/docs', 'report-draft.txt', 20), dir('/docs', 'reports'),
    file('/docs/reports', 'q1 report.xlsx'), file('/docs/reports', 'notes.md'),
    file('/ab', 'report.txt'), file('/abc', 'report.txt'),
    file('/docs', '中文文件名.txt'), file('/docs', 'Café.txt'), file('/docs', 'Cafe\u0301 noir.txt'.normalize('NFD')),
  ]);
});
afterEach(async () => {
  store.close();
  await rm(tmp, { recursive: true, force: true });
});

describe('keywords', () => {
  it('match every keyword as a case-insensitive substring, ordered by name', () => {
    expect(names(search('REPORT'))).toEqual(['Report Final.PDF', 'q1 report.xlsx', 'report-draft.txt', 'report.txt', 'report.txt', 'reports']);
    expect(names(search('report final'))).toEqual(['Report Final.PDF']);
    expect(names(search('final report'))).toEqual(['Report Final.PDF']);
    expect(names(search('report missing'))).toEqual([]);
  });

  it('uses a scan for keywords shorter than three characters, alone or mixed', () => {
    expect(names(search('q1'))).toEqual(['q1 report.xlsx']);
    expect(names(search('md'))).toEqual(['notes.md']);
    expect(names(search('report q1'))).toEqual(['q1 report.xlsx']);
    expect(search('x').total).toBe(7); // q1 report.xlsx and the six .txt files
  });

  it('finds CJK names by long and short keywords', () => {
    expect(names(search('文件名'))).toEqual(['中文文件名.txt']);
    expect(names(search('中文'))).toEqual(['中文文件名.txt']);
    expect(names(search('中 名'))).toEqual(['中文文件名.txt']);
  });

  it('matches accented names whatever their normal form (NFC/NFD) on either side', () => {
    const nfc = 'café';
    const nfd = 'cafe\u0301';
    expect(names(search(nfc)).sort()).toEqual(['Café.txt', 'Cafe\u0301 noir.txt'.normalize('NFD')].sort());
    expect(search(nfd).total).toBe(2);
    expect(search('CAFÉ NOIR').total).toBe(1);
  });

  it('an empty query matches everything below the parent', () => {
    expect(search('', { root: '/docs/reports' }).total).toBe(2);
  });

  it('quotes keywords holding FTS syntax', () => {
    store.upsert([file('/docs', 'a"b"c "quoted" AND name.txt')]);
    expect(names(search('"quoted"'))).toEqual(['a"b"c "quoted" AND name.txt']);
    expect(names(search('and'))).toEqual(['a"b"c "quoted" AND name.txt']);
  });
});

describe('scope, subtree and paging', () => {
  it('scope 1 is folders, 2 files', () => {
    expect(names(search('report', { scope: 1 }))).toEqual(['reports']);
    expect(search('report', { scope: 2 }).total).toBe(5);
  });

  it('searches the parent at any depth, on whole segments', () => {
    expect(paths(search('report', { root: '/ab' }))).toEqual(['/ab/report.txt']);
    expect(paths(search('report', { root: '/docs' }))).toEqual(['/docs/Report Final.PDF', '/docs/reports/q1 report.xlsx', '/docs/report-draft.txt', '/docs/reports']);
    expect(search('report', { root: '/docs/reports/q1 report.xlsx' }).total).toBe(0);
  });

  it('pages after counting; total counts every match', () => {
    const all = names(search('report'));
    const p2 = search('report', { offset: 2, limit: 2 });
    expect(p2.total).toBe(6);
    expect(names(p2)).toEqual(all.slice(2, 4));
    expect(search('report', { offset: 10, limit: 2 })).toEqual({ hits: [], total: 6 });
  });

  it('an offset or limit past 2^53 (absurd page numbers) answers an empty page with the total, not an SQL error', () => {
    expect(search('report', { offset: 1e15 * 1e5, limit: 1e5 })).toEqual({ hits: [], total: 6 });
    expect(search('report', { offset: 2 ** 53 * 2 ** 53, limit: 2 ** 53 })).toEqual({ hits: [], total: 6 });
    expect(search('report', { root: '/docs', offset: 1e20, limit: 1e20 })).toEqual({ hits: [], total: 4 });
    expect(search('report', { offset: 0, limit: 1e20 }).hits).toHaveLength(6);
  });
});

describe('offline storages', () => {
  it("leaves out the rows a disabled storage owns, not those of a storage mounted inside it", () => {
    store.upsert([dir('/docs/reports', 'inner'), file('/docs/reports/inner', 'report inner.txt')]);
    const offline = [{ path: '/docs', inner: ['/docs/reports/inner'] }];
    expect(paths(search('report', { offline }))).toEqual(['/docs/reports/inner/report inner.txt', '/ab/report.txt', '/abc/report.txt']);
    expect(search('report', { offline, root: '/docs' }).total).toBe(1);
    expect(paths(search('inner', { offline }))).toEqual(['/docs/reports/inner', '/docs/reports/inner/report inner.txt']);
    expect(paths(search('docs', { offline }))).toEqual([]); // the mount point itself
    expect(search('report', { offline, root: '/docs/reports/inner' }).total).toBe(1);
    // On whole segments: /ab offline leaves /abc alone; a root storage owns what no other one does.
    expect(paths(search('report', { offline: [{ path: '/ab', inner: [] }] }))).toEqual([
      '/docs/Report Final.PDF', '/docs/reports/q1 report.xlsx', '/docs/reports/inner/report inner.txt', '/docs/report-draft.txt', '/abc/report.txt', '/docs/reports',
    ]);
    expect(paths(search('report', { offline: [{ path: '/', inner: ['/abc'] }] }))).toEqual(['/abc/report.txt']);
  });

  it('many offline storages are checked row by row with the same answers', () => {
    const many = Array.from({ length: 80 }, (_, i) => ({ path: `/none${i}`, inner: [] }));
    const offline = [...many, { path: '/docs', inner: [] }, { path: '/ab', inner: [] }];
    expect(paths(search('report', { offline }))).toEqual(['/abc/report.txt']);
    expect(search('', { offline }).total).toBe(2);
  });
});

describe('plans', () => {
  it('the trigram index and the subtree scan give the same answers', () => {
    // A big subtree with a rare keyword takes the index; a small one is scanned.
    store.upsert(Array.from({ length: 400 }, (_, i) => file('/big/sub', `filler ${i}.txt`)));
    store.upsert([file('/big/sub', 'rare needle.txt'), file('/big', 'needle top.txt'), file('/small', 'needle small.txt')]);
    expect(paths(search('needle', { root: '/big' }))).toEqual(['/big/needle top.txt', '/big/sub/rare needle.txt']);
    expect(paths(search('needle', { root: '/small' }))).toEqual(['/small/needle small.txt']);
    expect(search('filler', { root: '/big', offset: 390, limit: 100 }).total).toBe(400);
    expect(search('filler 39', { root: '/big', offset: 5, limit: 100 }).hits).toHaveLength(9); // 39, 139, 239, 339, 390…399
  });
});

describe('access guards', () => {
  const denyUnder = (prefix: string): AccessChecker => ({
    guarded: [prefix],
    canAccess: (v) => !(v === prefix || v.startsWith(prefix + '/')),
  });

  it('asks the checker for rows inside guarded subtrees only, and total is the visible count', () => {
    const asked: string[] = [];
    const c = denyUnder('/docs/reports');
    const spy: AccessChecker = { guarded: c.guarded, canAccess: (v) => (asked.push(v), c.canAccess(v)) };
    const r = search('report', {}, spy);
    expect(names(r)).toEqual(['Report Final.PDF', 'report-draft.txt', 'report.txt', 'report.txt']);
    expect(r.total).toBe(4);
    expect([...new Set(asked)].sort()).toEqual(['/docs/reports', '/docs/reports/q1 report.xlsx']);
  });

  it('a guard at or above the searched folder asks for every row', () => {
    const asked: string[] = [];
    const r = search('report', { root: '/docs' }, { guarded: ['/'], canAccess: (v) => (asked.push(v), v.endsWith('.PDF')) });
    expect(r).toEqual({ hits: [file('/docs', 'Report Final.PDF', 10)], total: 1 });
    expect(new Set(asked).size).toBe(4);
  });
});

describe('tree edits', () => {
  it('removes, moves and copies subtrees; replaces a folder\'s children', () => {
    store.moveTree('/docs/reports', '/archive/old', dir('/archive', 'old'));
    expect(paths(search('', { root: '/archive' }))).toEqual(['/archive/old/notes.md', '/archive/old', '/archive/old/q1 report.xlsx']);
    expect(search('notes', { root: '/docs' }).total).toBe(0);
    store.copyTree('/archive/old', '/docs/copy', dir('/docs', 'copy'));
    expect(paths(search('notes'))).toEqual(['/archive/old/notes.md', '/docs/copy/notes.md']);
    store.removeTree('/archive');
    expect(paths(search('notes'))).toEqual(['/docs/copy/notes.md']);
    store.replaceChildren('/docs/copy', [file('/docs/copy', 'fresh report.txt')]);
    expect(paths(search('', { root: '/docs/copy' }))).toEqual(['/docs/copy/fresh report.txt']);
    store.ensureFolders('/new/a/b.txt');
    expect(paths(search('', { root: '/new' }))).toEqual(['/new/a']);
    store.upsert([file('/docs', 'report-draft.txt', 99), file('/new/a', 'b.txt')]); // one update, one insert
    expect(paths(search('b.txt'))).toEqual(['/new/a/b.txt']);
    // The store indexes inserted rows itself (no insert trigger): the FTS index matches the table exactly.
    expect(() => store.db.exec(`INSERT INTO names(names, rank) VALUES ('integrity-check', 1)`)).not.toThrow();
  });

  it('clear drops everything and the index keeps working', () => {
    store.clear();
    expect(search('').total).toBe(0);
    store.upsert([file('/', 'again report.txt')]);
    expect(names(search('report'))).toEqual(['again report.txt']);
  });
});
