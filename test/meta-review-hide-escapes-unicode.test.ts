/** Code review of users and meta rules through the admin API (second pass): defects proven on a real server. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { makeUser, names, ok, seed, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
afterAll(async () => ts?.close());

const FULL = { id: 0, password: '', p_sub: false, write: false, w_sub: false, hide: '', h_sub: false, readme: '', r_sub: false };

describe('hide lines only JavaScript can run', () => {
  // RE2 lacks `\Z` (regexp2: end of the name), so the line went to JavaScript, which reads an
  // escaped letter it does not know as the bare letter: the rule saved and hid `x.bakZ`, not `x.bak`.
  it('a line JavaScript would misread (`\\.bak\\Z`) is refused at save, not saved to hide nothing', async () => {
    await seed(ts, admin, { '/zhide/x.bak': 'b', '/zhide/keep.txt': 'k' });
    const viewer = await makeUser(ts, admin, 'zviewer', 0);
    const r = await ts.api('/api/admin/meta/create', { token: admin, body: { ...FULL, path: '/zhide', hide: 'keep\\.old\n\\.bak\\Z' } });
    expect(r.code).toBe(400);
    expect(r.message).toMatch(/^\\\.bak\\Z is illegal: /);
    const metas = await ts.api<{ total: number }>('/api/admin/meta/list', { token: admin });
    expect(metas.data!.total).toBe(0);
    expect(await names(ts, viewer, '/zhide')).toEqual(['keep.txt', 'x.bak']);
    // Lines only JavaScript runs (look-around) still save and hide, escaped punctuation included.
    await seed(ts, admin, { '/look/a.tmp': 'a', '/look/keep-b.tmp': 'k' });
    ok(await ts.api('/api/admin/meta/create', { token: admin, body: { ...FULL, path: '/look', hide: '^(?!keep\\-)\n(?i)(?<=A)\\.TMP$' } }));
    expect(await names(ts, viewer, '/look')).toEqual(['keep-b.tmp']);
  });
});

describe('hide lines read as regexp2 reads them', () => {
  // AList's regexp2 (without its ECMAScript option) gives \w and \d their Unicode meaning; RE2's are
  // ASCII, so a rule hiding "any word name .bak" left every Chinese or accented one shown.
  it('`\\w` and `\\d` match non-ASCII letters and digits, as in AList', async () => {
    await seed(ts, admin, { '/uni/备份.bak': 'b', '/uni/café.bak': 'c', '/uni/a-b.bak': 'x', '/uni/٣.log': 'd', '/uni/keep.txt': 'k' });
    const viewer = await makeUser(ts, admin, 'uviewer', 0);
    ok(await ts.api('/api/admin/meta/create', { token: admin, body: { ...FULL, path: '/uni', hide: '^\\w+\\.bak$\n^[\\d]\\.log$' } }));
    expect(await names(ts, viewer, '/uni')).toEqual(['a-b.bak', 'keep.txt']);
  });
});
