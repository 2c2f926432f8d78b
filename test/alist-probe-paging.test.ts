/**
 * AList's paging when per_page is omitted (or < 1) and page > 1. model.PageReq.Validate
 * (internal/model/req.go) turns per_page < 1 into MaxInt, then:
 * - fs/list pages in memory (server/handles/fsread.go `pagination`): start = (page-1)*MaxInt is
 *   past the end for page 2, so `content` is empty while `total` counts everything;
 * - the admin lists page in the database (internal/db: Offset((page-1)*perPage).Limit(perPage)),
 *   so page 2 is an empty `content` as well.
 * A script that walks pages until `content` is empty must therefore stop after page 1; answering
 * every entry again on each page would loop it for ever.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, seed, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  await seed(ts, admin, { '/pg/1.txt': '1', '/pg/2.txt': '2', '/pg/3.txt': '3' });
});
afterAll(async () => ts?.close());

type Page = { content: unknown[] | null; total: number };

describe('page > 1 with per_page omitted or 0', () => {
  it('fs/list: page 1 is everything, page 2 is empty, total unchanged', async () => {
    const p1 = await ts.api<Page>('/api/fs/list', { token: admin, body: { path: '/pg', page: 1, per_page: 0 } });
    ok(p1);
    expect(p1.data!.content).toHaveLength(3);
    for (const body of [{ path: '/pg', page: 2, per_page: 0 }, { path: '/pg', page: 2 }, { path: '/pg', page: 3 }]) {
      const r = await ts.api<Page>('/api/fs/list', { token: admin, body });
      ok(r);
      expect(r.data!.content).toEqual([]);
      expect(r.data!.total).toBe(3);
    }
  });

  it('admin lists (user, storage, meta): page 2 without per_page is empty', async () => {
    for (const path of ['/api/admin/user/list?page=2', '/api/admin/storage/list?page=2', '/api/admin/meta/list?page=2&per_page=0']) {
      const r = await ts.api<Page>(path, { token: admin });
      ok(r);
      expect(r.data!.content, path).toEqual([]);
      expect(r.data!.total, path).toBeGreaterThanOrEqual(path.includes('meta') ? 0 : 1);
    }
    const all = await ts.api<Page>('/api/admin/user/list?page=1', { token: admin });
    expect(all.data!.content).toHaveLength(2); // admin and guest
  });
});
