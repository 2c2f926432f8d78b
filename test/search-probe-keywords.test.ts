/**
 * fs/search keywords from an adversarial probe: SQL LIKE and FTS5 syntax characters are plain
 * characters of a name, and a keyword no name can hold (NUL) answers an empty page, never a 500.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, seed, startRestServer } from './fs-helpers.js';

interface SearchData { content: Array<{ parent: string; name: string }>; total: number }

let ts: TestServer;
let admin: string;

const names = async (keywords: string) => {
  const r = await ts.api<SearchData>('/api/fs/search', { token: admin, body: { parent: '/', keywords, scope: 0, page: 1, per_page: 100 } });
  ok(r);
  return r.data!.content.map((h) => h.name);
};

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  await seed(ts, admin, { '/k/report 100%.txt': 'x', "/k/it's_done.txt": 'y', '/k/"quoted" NEAR me.txt': 'q', '/k/a-b*c.txt': 'z' });
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'search_index', value: 'database' }] }));
  ok(await ts.api('/api/admin/index/build', { token: admin, body: {} }));
  const end = Date.now() + 15_000;
  while (!(await ts.api<{ is_done: boolean }>('/api/admin/index/progress', { token: admin })).data?.is_done && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 50));
  }
});
afterAll(async () => ts?.close());

it('a keyword holding NUL matches nothing (FTS5 could not parse it: was a 500)', async () => {
  for (const k of ['\u0000abc', 'rep\u0000ort', 'report \u0000xyz', '\u0000']) expect(await names(k), JSON.stringify(k)).toEqual([]);
});

it('LIKE and FTS5 syntax characters are matched literally', async () => {
  expect(await names('%')).toEqual(['report 100%.txt']);
  expect(await names('_')).toEqual(["it's_done.txt"]);
  expect(await names("'s_d")).toEqual(["it's_done.txt"]);
  expect(await names('"quoted"')).toEqual(['"quoted" NEAR me.txt']);
  expect(await names('NEAR')).toEqual(['"quoted" NEAR me.txt']);
  expect(await names('b*c')).toEqual(['a-b*c.txt']);
  expect(await names('-b*')).toEqual(['a-b*c.txt']);
  expect(await names('NEAR(quoted me)')).toEqual([]);
  expect(await names('report OR done')).toEqual([]);
});
