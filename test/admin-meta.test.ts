/** /api/admin/meta/* (alist-compat §13) and the effect of rules on listings. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { expectCode, list, makeUser, ok, seed, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;
type Meta = { id: number; path: string; password: string; p_sub: boolean; write: boolean; w_sub: boolean; hide: string; h_sub: boolean; readme: string; r_sub: boolean };

const FULL = { id: 0, password: '', p_sub: false, write: false, w_sub: false, hide: '', h_sub: false, readme: '', r_sub: false };
const post = (path: string, body?: unknown) => ts.api(path, { token: admin, body: body ?? {} });
const all = async () => (await ts.api<{ content: Meta[]; total: number }>('/api/admin/meta/list', { token: admin })).data!;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  await seed(ts, admin, { '/docs/a.txt': 'a', '/docs/.secret': 's', '/docs/sub/b.txt': 'b' });
});
afterAll(async () => ts?.close());

describe('meta CRUD', () => {
  it('creates with a cleaned path; list and get answer the rule', async () => {
    ok(await post('/api/admin/meta/create', { ...FULL, path: 'docs/', readme: 'read me', hide: '^\\.' }));
    const l = await all();
    expect(l.total).toBe(1);
    const m = l.content[0]!;
    expect(m).toMatchObject({ path: '/docs', readme: 'read me', hide: '^\\.', p_sub: false });
    const g = await ts.api<Meta>(`/api/admin/meta/get?id=${m.id}`, { token: admin });
    ok(g);
    expect(g.data).toEqual(m);
  });

  it('a rule takes effect at once: readme and hide in listings', async () => {
    const u = await makeUser(ts, admin, 'viewer', 0);
    const r = await list(ts, u, '/docs');
    expect(r.data!.readme).toBe('read me');
    expect(r.data!.content.map((e) => e.name).sort()).toEqual(['a.txt', 'sub']);
  });

  it('a duplicate path is 500; a missing path and an illegal hide line are 400', async () => {
    expect((await post('/api/admin/meta/create', { ...FULL, path: '/docs' })).code).toBe(500);
    expect((await post('/api/admin/meta/create', { ...FULL, path: '' })).code).toBe(400);
    const bad = await post('/api/admin/meta/create', { ...FULL, path: '/other', hide: 'ok\n([' });
    expect(bad.code).toBe(400);
    expect(bad.message).toMatch(/^\(\[ is illegal: /);
    expect((await all()).total).toBe(1);
  });

  it('an id that is not a safe integer, or a field of the wrong type, is 400 and stores nothing', async () => {
    const before = (await all()).total;
    // 1e20 + 1 === 1e20: such ids collide, and uniqueness checks keyed on the id let duplicates in.
    for (const bad of [{ id: 1e20 }, { id: 1.5 }, { id: 'x' }, { password: 123 }, { hide: ['a'] }]) {
      const r = await post('/api/admin/meta/create', { ...FULL, path: '/typed-ids', ...bad });
      expect(r.code, JSON.stringify(bad)).toBe(400);
    }
    expect((await all()).total).toBe(before);
  });

  it('update changes a rule (and its effect); unknown id is 500 failed get old meta', async () => {
    const m = (await all()).content[0]!;
    ok(await post('/api/admin/meta/update', { ...m, readme: 'changed', r_sub: true }));
    expect((await list(ts, admin, '/docs/sub')).data!.readme).toBe('changed');
    expectCode(await post('/api/admin/meta/update', { ...m, id: 999 }), 500, 'failed get old meta: record not found');
    expectCode(await post('/api/admin/meta/update', { ...m, hide: '[' }), 400, `[ is illegal: ${badRegexMessage('[')}`);
  });

  it('get: bad id 400, unknown id 500', async () => {
    expectCode(await ts.api('/api/admin/meta/get?id=x', { token: admin }), 400, 'strconv.Atoi: parsing "x": invalid syntax');
    expectCode(await ts.api('/api/admin/meta/get?id=999', { token: admin }), 500, 'failed get old meta: record not found');
  });

  it('delete removes the rule and its effect', async () => {
    const m = (await all()).content[0]!;
    ok(await post(`/api/admin/meta/delete?id=${m.id}`));
    expect((await all()).total).toBe(0);
    expect((await list(ts, admin, '/docs')).data!.readme).toBe('');
    expectCode(await post('/api/admin/meta/delete?id=abc'), 400, 'strconv.Atoi: parsing "abc": invalid syntax');
  });

  it('paging of the list, and admin only', async () => {
    for (const p of ['/p1', '/p2', '/p3']) ok(await post('/api/admin/meta/create', { ...FULL, path: p }));
    const page = await ts.api<{ content: Meta[]; total: number }>('/api/admin/meta/list?page=2&per_page=2', { token: admin });
    expect(page.data!.total).toBe(3);
    expect(page.data!.content.map((m) => m.path)).toEqual(['/p3']);
    const u = await makeUser(ts, admin, 'notadmin', 0xff);
    expectCode(await ts.api('/api/admin/meta/list', { token: u }), 403, 'You are not an admin');
    expectCode(await ts.api('/api/admin/meta/create', { token: u, body: { ...FULL, path: '/x' } }), 403, 'You are not an admin');
  });
});

function badRegexMessage(src: string): string {
  try {
    new RegExp(src);
    return '';
  } catch (e) {
    return (e as Error).message;
  }
}
