/** POST /api/fs/search and /api/admin/index/* over the real server (alist-compat §8, §9). */
import { mkdir as mkdirHost, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { addMeta, expectCode, makeUser, mkdir, ok, PERM, putFile, seed, startRestServer } from './fs-helpers.js';

interface Hit { parent: string; name: string; is_dir: boolean; size: number; type: number }
interface SearchData { content: Hit[]; total: number }

let ts: TestServer;
let admin: string;

const search = (token: string, body: Record<string, unknown>) =>
  ts.api<SearchData>('/api/fs/search', { token, body: { parent: '/', keywords: '', scope: 0, page: 1, per_page: 100, password: '', ...body } });
const hitPaths = (d: SearchData | null) => d!.content.map((h) => (h.parent === '/' ? '' : h.parent) + '/' + h.name);
const setting = (key: string, value: string) => ts.api('/api/admin/setting/save', { token: admin, body: [{ key, value }] });

async function until<T>(fn: () => Promise<T>, good: (v: T) => boolean, ms = 15_000, every = 100): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (good(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, every));
  }
}

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  await seed(ts, admin, {
    '/docs/Report Final.pdf': 'pdf', '/docs/report-draft.txt': 'draft', '/docs/中文文件名.txt': 'zh', '/docs/cafe\u0301.mp3': 'nfd',
    '/docs/music/Track Report.flac': 'flac', '/priv/report secret.txt': 's', '/hid/report hidden.txt': 'h', '/docs/.trash-report/x.txt': 'x',
  });
  ok(await mkdir(ts, admin, '/docs/report folder'));
});
afterAll(async () => ts?.close());

describe('search_index none', () => {
  it('answers 500 search not available on search and on the index API', async () => {
    expectCode(await search(admin, { keywords: 'report' }), 500, 'search not available');
    expectCode(await ts.api('/api/admin/index/progress', { token: admin }), 500, 'search not available');
  });
});

describe('with search_index database', () => {
  beforeAll(async () => {
    ok(await setting('search_index', 'database'));
    expectCode(await ts.api('/api/admin/index/stop', { token: admin, body: {} }), 400, 'index is not running');
    ok(await ts.api('/api/admin/index/build', { token: admin, body: {} }));
    const p = await until(() => ts.api<{ is_done: boolean }>('/api/admin/index/progress', { token: admin }), (r) => !!r.data?.is_done);
    expect(p.data).toMatchObject({ is_done: true, error: '' });
    await addMeta(ts, admin, { path: '/priv', password: 'pw', p_sub: true });
    await addMeta(ts, admin, { path: '/', hide: '^hid$|^\\.trash', h_sub: true });
  });

  it('reports progress in AList shape', async () => {
    const r = await ts.api<Record<string, unknown>>('/api/admin/index/progress', { token: admin });
    ok(r);
    expect(Object.keys(r.data!).sort()).toEqual(['error', 'is_done', 'last_done_time', 'obj_count']);
    expect(r.data!.obj_count).toBeGreaterThanOrEqual(12);
    expect(String(r.data!.last_done_time)).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it('answers AList entries ordered by name, with type integers and totals', async () => {
    const r = await search(admin, { keywords: 'REPORT', parent: '/docs' });
    ok(r);
    expect(hitPaths(r.data)).toEqual(['/docs/.trash-report', '/docs/Report Final.pdf', '/docs/music/Track Report.flac', '/docs/report folder', '/docs/report-draft.txt']);
    const byName = Object.fromEntries(r.data!.content.map((h) => [h.name, h]));
    expect(byName['report folder']).toEqual({ parent: '/docs', name: 'report folder', is_dir: true, size: 0, type: 1 });
    expect(byName['Track Report.flac']).toEqual({ parent: '/docs/music', name: 'Track Report.flac', is_dir: false, size: 4, type: 3 });
    expect(byName['report-draft.txt']!.type).toBe(4);
    expect(r.data!.total).toBe(5);
  });

  it('ANDs keywords, honours scope and pages', async () => {
    expect(hitPaths((await search(admin, { keywords: 'report final' })).data)).toEqual(['/docs/Report Final.pdf']);
    expect(hitPaths((await search(admin, { keywords: 'report', parent: '/docs', scope: 1 })).data)).toEqual(['/docs/.trash-report', '/docs/report folder']);
    expect((await search(admin, { keywords: 'report', parent: '/docs', scope: 2 })).data!.total).toBe(3);
    const p2 = await search(admin, { keywords: 'report', parent: '/docs', page: 2, per_page: 2 });
    expect(hitPaths(p2.data)).toEqual(['/docs/music/Track Report.flac', '/docs/report folder']);
    expect(p2.data!.total).toBe(5);
    const empty = await search(admin, { keywords: 'nothing-matches-this' });
    ok(empty);
    expect(empty.data).toEqual({ content: [], total: 0 });
  });

  it("refuses page < 1 and per_page < 1 with AList's messages", async () => {
    expectCode(await search(admin, { keywords: 'report', page: 0 }), 400, "page can't < 1");
    expectCode(await search(admin, { keywords: 'report', per_page: 0 }), 400, "per_page can't < 1");
  });

  it('refuses keywords past 512 characters or 32 words with a 400, at once', async () => {
    // Refused before any trigram is looked up (scanning all of them took ~7 s).
    expectCode(await search(admin, { keywords: 'a'.repeat(500_000) }), 400, 'keywords too long: at most 512 characters');
    expectCode(await search(admin, { keywords: Array.from({ length: 40_000 }, (_, i) => String(i).padStart(5, 'x')).join(' ') }), 400, 'keywords too long: at most 512 characters');
    // ~1,000 keywords used to exceed SQLite's expression depth (500 internal error).
    expect((await search(admin, { keywords: Array.from({ length: 1000 }, (_, i) => `k${i}`).join(' ') })).code).toBe(400);
    expectCode(await search(admin, { keywords: 'a b c d e f g h i j k l m n o p q r s t u v w x y z 0 1 2 3 4 5 6' }), 400, 'too many keywords: at most 32');
    const r = await search(admin, { keywords: 'r e p o r t f i n a l p d f R E P O R T' }); // 11 distinct, all in the name
    ok(r);
    expect(hitPaths(r.data)).toEqual(['/docs/Report Final.pdf']);
  });

  it('answers an empty page with the total for page numbers past any row', async () => {
    for (const [page, per_page] of [[1e15, 100_000], [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER]]) {
      const r = await search(admin, { keywords: 'report', parent: '/docs', page, per_page });
      ok(r);
      expect(r.data).toEqual({ content: [], total: 5 });
    }
  });

  it('finds CJK and accented names whatever their normal form', async () => {
    expect(hitPaths((await search(admin, { keywords: '文件' })).data)).toEqual(['/docs/中文文件名.txt']);
    expect(hitPaths((await search(admin, { keywords: '中文文件名' })).data)).toEqual(['/docs/中文文件名.txt']);
    expect((await search(admin, { keywords: 'CAFÉ' })).data!.total).toBe(1); // typed NFC, stored NFD
  });

  it('filters by the caller: hidden, password, base path', async () => {
    const user = await makeUser(ts, admin, 'searcher', 0);
    const seen = hitPaths((await search(user, { keywords: 'report' })).data);
    expect(seen).not.toContain('/priv/report secret.txt');
    expect(seen).not.toContain('/hid/report hidden.txt');
    expect(seen).not.toContain('/docs/.trash-report');
    expect((await search(user, { keywords: 'report' })).data!.total).toBe(seen.length);
    expect(hitPaths((await search(user, { keywords: 'secret', password: 'pw' })).data)).toEqual(['/priv/report secret.txt']);
    const see = await makeUser(ts, admin, 'seer', PERM.SEE_HIDDEN | PERM.NO_PASSWORD);
    expect(hitPaths((await search(see, { keywords: 'hidden secret' })).data)).toEqual([]);
    expect((await search(see, { keywords: 'report' })).data!.total).toBe(7);
    const based = await makeUser(ts, admin, 'based', 0, '/docs/music');
    const r = await search(based, { keywords: 'report' });
    expect(r.data).toEqual({ total: 1, content: [{ parent: '/docs/music', name: 'Track Report.flac', is_dir: false, size: 4, type: 3 }] });
    expectCode(await search(based, { keywords: 'report', parent: '/../..' }), 403, 'access using relative path is not allowed');
  });

  it('sees REST writes at once', async () => {
    ok(await putFile(ts, admin, '/docs/fresh upload.txt', 'new'));
    expect(hitPaths((await search(admin, { keywords: 'fresh' })).data)).toEqual(['/docs/fresh upload.txt']);
    ok(await ts.api('/api/fs/rename', { token: admin, body: { path: '/docs/fresh upload.txt', name: 'renamed upload.txt' } }));
    expect(hitPaths((await search(admin, { keywords: 'upload' })).data)).toEqual(['/docs/renamed upload.txt']);
    ok(await ts.api('/api/fs/remove', { token: admin, body: { dir: '/docs', names: ['renamed upload.txt'] } }));
    expect((await search(admin, { keywords: 'upload' })).data!.total).toBe(0);
  });

  it('picks up a file created directly on disk within seconds', async () => {
    const dir = join(ts.dataDir, 'storage', 'docs', 'outside');
    await mkdirHost(dir, { recursive: true });
    const file = join(dir, 'dropped by hand.txt');
    // Rewritten while waiting: the watcher may still be doing its initial scan at the first write.
    const r = await until(async () => {
      await writeFile(file, String(Date.now()));
      return search(admin, { keywords: 'dropped' });
    }, (x) => x.data?.total === 1, 15_000, 300);
    expect(hitPaths(r.data)).toEqual(['/docs/outside/dropped by hand.txt']);
  });

  it('leaves out a disabled storage (as fs/get does) until enabled, and a moved storage\'s old paths', async () => {
    const user = await makeUser(ts, admin, 'mover', 0);
    const c = await ts.api<{ id: number }>('/api/admin/storage/create', { token: admin, body: { mount_path: '/zoo', driver: 'Memory' } });
    ok(c);
    const id = c.data!.id;
    ok(await putFile(ts, admin, '/zoo/zebra one.txt', 'z'));
    expect(hitPaths((await search(user, { keywords: 'zebra' })).data)).toEqual(['/zoo/zebra one.txt']);
    ok(await ts.api(`/api/admin/storage/disable?id=${id}`, { token: admin, body: {} }));
    expectCode(await ts.api('/api/fs/get', { token: admin, body: { path: '/zoo/zebra one.txt' } }), 500, 'storage not init: disabled');
    for (const t of [user, admin]) expect((await search(t, { keywords: 'zebra' })).data).toEqual({ content: [], total: 0 });
    expect((await search(admin, { keywords: 'zoo' })).data!.total).toBe(0);
    ok(await ts.api(`/api/admin/storage/enable?id=${id}`, { token: admin, body: {} }));
    expect(hitPaths((await search(user, { keywords: 'zebra' })).data)).toEqual(['/zoo/zebra one.txt']);
    const s = (await ts.api<Record<string, unknown>>(`/api/admin/storage/get?id=${id}`, { token: admin })).data!;
    ok(await ts.api('/api/admin/storage/update', { token: admin, body: { ...s, mount_path: '/zoo2' } }));
    expect((await search(admin, { keywords: 'zebra' })).data!.total).toBe(0);
    expect((await search(admin, { keywords: 'zoo' })).data!.total).toBe(0);
    ok(await ts.api(`/api/admin/storage/delete?id=${id}`, { token: admin, body: {} }));
  });

  it('clear empties the index; update re-indexes a folder', async () => {
    ok(await ts.api('/api/admin/index/clear', { token: admin, body: {} }));
    expect((await search(admin, { keywords: 'report' })).data!.total).toBe(0);
    ok(await ts.api('/api/admin/index/update', { token: admin, body: { paths: ['/docs/music'], max_depth: -1 } }));
    const r = await until(() => search(admin, { keywords: 'report' }), (x) => x.data?.total === 1);
    expect(hitPaths(r.data)).toEqual(['/docs/music/Track Report.flac']);
    expect(hitPaths((await search(admin, { keywords: 'music' })).data)).toEqual(['/docs/music']);
  });
});
