/**
 * Search index, second review pass: listings that refresh the index (auto_update_index) neither drop
 * a disabled storage's rows nor keep the content of a folder that became a file; case folding of the
 * Greek sigma; a damaged search.db is replaced and rebuilt; storages deleted from a nested path,
 * edited to serve another root, or mounted over a folder a build is listing leave no stale rows; a
 * refused build request does not clear the index first.
 */
import Database from 'better-sqlite3';
import { mkdir as mkdirHost, mkdtemp, open, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { addLocalStorage, until } from './tasks-helpers.js';
import { holdListing } from './search-helpers.js';

interface Hit { parent: string; name: string; is_dir: boolean }
interface SearchData { content: Hit[]; total: number }

let ts: TestServer;
let admin: string;

const search = (body: Record<string, unknown>, token = admin) =>
  ts.api<SearchData>('/api/fs/search', { token, body: { parent: '/', keywords: '', scope: 0, page: 1, per_page: 100, password: '', ...body } });
const hitPaths = async (keywords: string, token = admin) => {
  const r = await search({ keywords }, token);
  ok(r);
  return r.data!.content.map((h) => `${h.parent === '/' ? '' : h.parent}/${h.name}`);
};
const setting = (key: string, value: string) => ts.api('/api/admin/setting/save', { token: admin, body: [{ key, value }] });
const createStorage = async (body: Record<string, unknown>): Promise<number> => {
  const c = await ts.api<{ id: number }>('/api/admin/storage/create', { token: admin, body });
  ok(c);
  return c.data!.id;
};
const list = (path: string) => ts.api('/api/fs/list', { token: admin, body: { path } });

async function build(): Promise<void> {
  // An update job started by an earlier test (an edited storage) may still be finishing.
  ok(await until('a build started', async () => {
    const r = await ts.api('/api/admin/index/build', { token: admin, body: {} });
    return r.message === 'index is running' ? undefined : r;
  }));
  await until('the build', async () => ((await ts.api<{ is_done: boolean }>('/api/admin/index/progress', { token: admin })).data?.is_done ? true : undefined));
}

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  ok(await setting('search_index', 'database'));
});
afterAll(async () => ts?.close());

it('a listing of the folder above a disabled storage keeps its rows, found again once enabled', async () => {
  const id = await createStorage({ mount_path: '/zoo2/inner', driver: 'Memory' });
  ok(await putFile(ts, admin, '/zoo2/inner/okapi one.txt', 'o'));
  await build();
  expect(await hitPaths('okapi')).toEqual(['/zoo2/inner/okapi one.txt']);
  ok(await setting('auto_update_index', 'true'));
  try {
    ok(await ts.api(`/api/admin/storage/disable?id=${id}`, { token: admin, body: {} }));
    ok(await list('/')); // a disabled storage is no mount folder in the listing
    ok(await ts.api(`/api/admin/storage/enable?id=${id}`, { token: admin, body: {} }));
    expect(await hitPaths('okapi')).toEqual(['/zoo2/inner/okapi one.txt']);
    expect(await hitPaths('zoo2')).toEqual(['/zoo2']);
  } finally {
    ok(await setting('auto_update_index', 'false'));
  }
});

it('a listing showing a file where a folder was drops what the index held below that folder', async () => {
  await createStorage({ mount_path: '/mem', driver: 'Memory' });
  await createStorage({ mount_path: '/al', driver: 'Alias', addition: JSON.stringify({ paths: '/mem' }) });
  ok(await putFile(ts, admin, '/mem/d/ghostkid.txt', 'g'));
  await build();
  expect(await hitPaths('ghostkid')).toEqual(['/al/d/ghostkid.txt', '/mem/d/ghostkid.txt']);
  // Changed through /mem: the alias's rows only learn of it when /al is listed.
  ok(await ts.api('/api/fs/remove', { token: admin, body: { dir: '/mem', names: ['d'] } }));
  ok(await putFile(ts, admin, '/mem/d', 'now a file'));
  ok(await setting('auto_update_index', 'true'));
  try {
    ok(await list('/al'));
    expect(await hitPaths('ghostkid')).toEqual([]);
    const d = await search({ keywords: 'd', parent: '/al' });
    expect(d.data!.content.map((h) => [h.name, h.is_dir])).toEqual([['d', false]]);
  } finally {
    ok(await setting('auto_update_index', 'false'));
  }
});

it('a keyword ending in a capital sigma finds the name holding it mid-word (σ and ς fold alike)', async () => {
  ok(await putFile(ts, admin, '/greek/ΠΑΣΑ ΟΔΟΣ.txt', 'g'));
  await build();
  for (const k of ['ΠΑΣ', 'πασ', 'πας', 'ΟΔΟΣ', 'οδοσ', 'ΑΣΑ']) expect([k, await hitPaths(k)]).toEqual([k, ['/greek/ΠΑΣΑ ΟΔΟΣ.txt']]);
});

/** Overwrite the first page of each table (SQLite's own layout says where) with garbage. */
async function damageTables(file: string, tables: string[]): Promise<void> {
  const db = new Database(file);
  db.pragma('wal_checkpoint(TRUNCATE)');
  const size = db.pragma('page_size', { simple: true }) as number;
  const roots = tables.map((t) => db.prepare('SELECT rootpage FROM sqlite_master WHERE name = ?').pluck().get(t) as number);
  db.close();
  const fh = await open(file, 'r+');
  try {
    for (const r of roots) await fh.write(Buffer.alloc(size, 0x5a), 0, size, (r - 1) * size);
  } finally {
    await fh.close();
  }
}

/** Index a file, stop, damage `tables` of search.db, start again: a search finds the file within a bounded wait. */
async function afterDamage(tables: string[]): Promise<string> {
  const data = await mkdtemp(join(tmpdir(), 'treegate-search2-'));
  try {
    let s = await startTestServer({ dataDir: data, env: { TREEGATE_SFTP_ENABLE: 'false' } });
    try {
      const t = await s.login();
      ok(await s.api('/api/admin/setting/save', { token: t, body: [{ key: 'search_index', value: 'database' }] }));
      ok(await putFile(s, t, '/needle-in-db.txt', 'n'));
      ok(await s.api('/api/admin/index/build', { token: t, body: {} }));
      await until('the build', async () => ((await s.api<{ is_done: boolean }>('/api/admin/index/progress', { token: t })).data?.is_done ? true : undefined));
    } finally {
      await s.close();
    }
    await damageTables(join(data, 'search.db'), tables);
    s = await startTestServer({ dataDir: data, env: { TREEGATE_SFTP_ENABLE: 'false' } });
    try {
      const t = await s.login();
      const find = () => s.api<SearchData>('/api/fs/search', { token: t, body: { parent: '/', keywords: 'needle', page: 1, per_page: 10 } });
      let last = await find();
      for (let i = 0; i < 100 && !last.data?.content?.length; i++) {
        await new Promise((r) => setTimeout(r, 100));
        last = await find();
      }
      return `${last.code} ${last.message} ${JSON.stringify(last.data?.content?.map((h) => h.name) ?? null)}`;
    } finally {
      await s.close();
    }
  } finally {
    await rm(data, { recursive: true, force: true });
  }
}

it('a search.db whose FTS tables are damaged (opening fails) is replaced and rebuilt', async () => {
  expect(await afterDamage(['names_config', 'names_data'])).toBe('200 success ["needle-in-db.txt"]');
});

it('a search.db whose entries are damaged (searches fail) is replaced and rebuilt', async () => {
  expect(await afterDamage(['entries'])).toBe('200 success ["needle-in-db.txt"]');
});

it('a storage edited to serve another root at the same mount path: old rows go, the new root is indexed', async () => {
  const oldRoot = await addLocalStorage(ts, admin, '/lemurs');
  const newRoot = await mkdtemp(join(tmpdir(), 'treegate-search2-'));
  try {
    await writeFile(join(oldRoot, 'lemur old.txt'), 'o');
    await mkdirHost(join(newRoot, 'sub'));
    await writeFile(join(newRoot, 'sub', 'lemur new.txt'), 'n');
    await build();
    expect(await hitPaths('lemur')).toEqual(['/lemurs/lemur old.txt', '/lemurs']);
    const st = (await ts.api<Array<Record<string, unknown>>>('/api/admin/storage/list', { token: admin })).data as unknown as { content: Array<Record<string, unknown>> };
    const s = st.content.find((x) => x.mount_path === '/lemurs')!;
    ok(await ts.api('/api/admin/storage/update', { token: admin, body: { ...s, addition: JSON.stringify({ root_folder_path: newRoot }) } }));
    const want = JSON.stringify(['/lemurs/sub/lemur new.txt', '/lemurs']);
    const got = await until('the new root indexed', async () => {
      const h = await hitPaths('lemur');
      return JSON.stringify(h) === want ? h : undefined;
    }, 10_000).catch(() => hitPaths('lemur'));
    expect(got).toEqual(['/lemurs/sub/lemur new.txt', '/lemurs']);
  } finally {
    await rm(newRoot, { recursive: true, force: true });
    await rm(oldRoot, { recursive: true, force: true });
  }
});

it('a build refused for a bad ignore path leaves the index as it was', async () => {
  ok(await putFile(ts, admin, '/kept/quokka.txt', 'q'));
  await build();
  const r = await ts.api('/api/admin/index/build', { token: admin, body: { ignore_paths: ['/a/../b'] } });
  expect(r.code).toBe(403); // a relative path, as everywhere
  expect(await hitPaths('quokka')).toEqual(['/kept/quokka.txt']);
});

it("a storage deleted from a nested path leaves no row of the folder that only led to it", async () => {
  const id = await createStorage({ mount_path: '/vanish-a/vanish-b', driver: 'Memory' });
  ok(await putFile(ts, admin, '/vanish-a/vanish-b/vanish file.txt', 'v'));
  await build();
  expect(await hitPaths('vanish')).toEqual(['/vanish-a/vanish-b/vanish file.txt', '/vanish-a', '/vanish-a/vanish-b']);
  ok(await ts.api(`/api/admin/storage/delete?id=${id}`, { token: admin, body: {} }));
  expect((await ts.api('/api/fs/get', { token: admin, body: { path: '/vanish-a' } })).code).toBe(500); // object not found
  const got = await until('the folder row gone', async () => {
    const h = await hitPaths('vanish');
    return h.length === 0 ? h : undefined;
  }, 5_000).catch(() => hitPaths('vanish'));
  expect(got).toEqual([]);
});

it("a storage mounted over a folder while a build lists that folder leaves none of the folder's rows", async () => {
  ok(await putFile(ts, admin, '/cover/sub/yy covered.txt', 'c'));
  const h = holdListing(ts, '/cover/sub');
  try {
    ok(await ts.api('/api/admin/index/build', { token: admin, body: {} }));
    await until('the held listing', async () => (h.held() ? true : undefined), 15_000, 20);
    await createStorage({ mount_path: '/cover/sub', driver: 'Memory' });
    ok(await putFile(ts, admin, '/cover/sub/yy fresh.txt', 'f'));
    h.release();
    await until('the build', async () => ((await ts.api<{ is_done: boolean }>('/api/admin/index/progress', { token: admin })).data?.is_done ? true : undefined));
  } finally {
    h.restore();
  }
  expect((await ts.api('/api/fs/get', { token: admin, body: { path: '/cover/sub/yy covered.txt' } })).code).toBe(500);
  expect(await hitPaths('yy covered')).toEqual([]);
  // The new storage's own file is still found (listed again after the build).
  const want = JSON.stringify(['/cover/sub/yy fresh.txt']);
  const got = await until('the follow-up update', async () => {
    const hs = await hitPaths('yy');
    return JSON.stringify(hs) === want ? hs : undefined;
  }, 10_000).catch(() => hitPaths('yy'));
  expect(got).toEqual(['/cover/sub/yy fresh.txt']);
});

it('a folder replaced by a file on disk leaves nothing of its old content findable', async () => {
  const root = await addLocalStorage(ts, admin, '/numbats');
  const away = await mkdtemp(join(tmpdir(), 'treegate-search2-'));
  try {
    await mkdirHost(join(root, 'e', 'deep'), { recursive: true });
    await writeFile(join(root, 'e', 'deep', 'numbat.txt'), 'n');
    await build();
    expect(await hitPaths('numbat.txt')).toEqual(['/numbats/e/deep/numbat.txt']);
    await rename(join(root, 'e'), join(away, 'e')); // moved off the storage: its own watch sees nothing
    await writeFile(join(root, 'e'), 'a file now');
    const got = await until('the file indexed', async () => {
      const h = await search({ keywords: 'e', parent: '/numbats' });
      const rows = h.data!.content.map((x) => `${x.parent}/${x.name}:${x.is_dir}`);
      return rows.includes('/numbats/e:false') ? rows : undefined;
    }, 10_000);
    expect(got).toEqual(['/numbats/e:false']);
  } finally {
    await rm(away, { recursive: true, force: true });
    await rm(root, { recursive: true, force: true });
  }
});
