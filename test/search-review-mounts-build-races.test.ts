/**
 * Search index review: rows a build job listed reach the file after the listing, so whatever goes
 * away meanwhile must not come back with them — a storage deleted (or moved) during the build, and
 * a file removed on disk behind treegate's back (Local watch).
 */
import { mkdir as mkdirHost, rm as rmHost, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { ok } from './fs-helpers.js';
import { addLocalStorage, until } from './tasks-helpers.js';
import { holdListing } from './search-helpers.js';

let ts: TestServer;
let admin: string;

async function names(keywords: string): Promise<string[]> {
  const r = await ts.api<{ content: Array<{ parent: string; name: string }> }>('/api/fs/search', { token: admin, body: { parent: '/', keywords, scope: 0, page: 1, per_page: 100 } });
  ok(r);
  return r.data!.content.map((h) => `${h.parent}/${h.name}`);
}

const built = () => until('the build', async () => ((await ts.api<{ is_done: boolean }>('/api/admin/index/progress', { token: admin })).data?.is_done ? true : undefined), 30_000, 50);

beforeAll(async () => {
  ts = await startTestServer();
  admin = await ts.login();
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'search_index', value: 'database' }] }));
});
afterAll(async () => ts?.close());

it('a storage deleted while a build lists it leaves no rows behind', async () => {
  const root = await addLocalStorage(ts, admin, '/gone');
  await mkdirHost(join(root, 'sub'));
  await writeFile(join(root, 'sub', 'zz unmounted.txt'), 'x');
  const h = holdListing(ts, '/gone/sub');
  try {
    ok(await ts.api('/api/admin/index/build', { token: admin, body: {} }));
    await until('the held listing', async () => (h.held() ? true : undefined), 15_000, 20);
    const id = (await ts.api<{ content: Array<{ id: number; mount_path: string }> }>('/api/admin/storage/list', { token: admin })).data!.content.find((s) => s.mount_path === '/gone')!.id;
    ok(await ts.api(`/api/admin/storage/delete?id=${id}`, { token: admin, body: {} }));
    h.release();
    await built();
  } finally {
    h.restore();
  }
  expect(await names('zz unmounted')).toEqual([]);
  expect(await names('gone')).toEqual([]);
});

it('a file removed on disk while a build lists its folder leaves no row behind', async () => {
  const root = await addLocalStorage(ts, admin, '/w');
  await mkdirHost(join(root, 'sub'));
  await writeFile(join(root, 'sub', 'zz vanished.txt'), 'x');
  await writeFile(join(root, 'sub', 'zz kept.txt'), 'x');
  ok(await ts.api('/api/admin/index/build', { token: admin, body: {} }));
  await built();
  expect(await names('zz ')).toEqual(['/w/sub/zz kept.txt', '/w/sub/zz vanished.txt']);
  // The watcher's lookup of the removed file, done while the build's listing is held.
  const vfs = ts.running.core.vfs;
  const stat = vfs.stat.bind(vfs);
  let looked = false;
  vfs.stat = async (ctx, p) => {
    try {
      return await stat(ctx, p);
    } finally {
      if (p === '/w/sub/zz vanished.txt') setImmediate(() => (looked = true));
    }
  };
  const h = holdListing(ts, '/w/sub');
  try {
    ok(await ts.api('/api/admin/index/build', { token: admin, body: {} }));
    await until('the held listing', async () => (h.held() ? true : undefined), 15_000, 20);
    await rmHost(join(root, 'sub', 'zz vanished.txt'));
    await until('the outside change applied', async () => (looked ? true : undefined), 15_000, 20);
    h.release();
    await built();
  } finally {
    h.restore();
    vfs.stat = stat;
  }
  expect(await names('zz ')).toEqual(['/w/sub/zz kept.txt']);
});

it("a storage mounted over another storage's folder takes that folder's rows out of the index", async () => {
  const root = await addLocalStorage(ts, admin, '/sh');
  await mkdirHost(join(root, 'x'));
  await writeFile(join(root, 'x', 'zz shadowed.txt'), 'x');
  ok(await ts.api('/api/admin/index/build', { token: admin, body: {} }));
  await built();
  expect(await names('zz shadowed')).toEqual(['/sh/x/zz shadowed.txt']);
  // /sh/x is now the new storage's root: the old folder's file is no longer served there.
  await addLocalStorage(ts, admin, '/sh/x');
  expect((await ts.api('/api/fs/get', { token: admin, body: { path: '/sh/x/zz shadowed.txt' } })).code).not.toBe(200);
  expect(await names('zz shadowed')).toEqual([]);
  expect(await names('x')).toContain('/sh/x');
});
