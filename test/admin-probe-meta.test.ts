/** Adversarial probe of /api/admin/meta/*: wrongly typed flags and what they would protect. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { expectCode, list, makeUser, ok, seed, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;
const post = (path: string, body: unknown) => ts.api(path, { token: admin, body });
const rules = async () => (await ts.api<{ content: Array<Record<string, unknown>>; total: number }>('/api/admin/meta/list', { token: admin })).data!;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  await seed(ts, admin, { '/vault/sub/a.txt': 'a' });
});
afterAll(async () => ts?.close());

describe('meta flags', () => {
  it('a flag that is not a boolean is 400 and stores nothing (p_sub "yes" must not leave subfolders open)', async () => {
    for (const bad of [{ p_sub: 'yes' }, { w_sub: 2 }, { h_sub: [] }, { write: 'no' }]) {
      const r = await post('/api/admin/meta/create', { path: '/vault', password: 'pw', ...bad });
      expectCode(r, 400, `invalid request: ${Object.keys(bad)[0]} must be a boolean`);
    }
    expect((await rules()).total).toBe(0);
  });

  it('JSON booleans and form texts still work: p_sub protects the subfolder', async () => {
    ok(await post('/api/admin/meta/create', { path: '/vault', password: 'pw', p_sub: true, write: null }));
    const u = await makeUser(ts, admin, 'reader', 0);
    expectCode(await list(ts, u, '/vault/sub'), 403, 'password is incorrect or you have no permission');
    ok(await list(ts, u, '/vault/sub', { password: 'pw' }));
    const id = (await rules()).content[0]!.id as number;
    const form = await ts.api('/api/admin/meta/update', {
      token: admin, body: `id=${id}&path=/vault&password=pw&p_sub=false`, headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    ok(form);
    expect((await rules()).content[0]).toMatchObject({ p_sub: false, password: 'pw' });
  });
});
