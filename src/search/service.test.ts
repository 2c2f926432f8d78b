/** SearchService over a real VFS (Memory storages): building, resuming, staying current, access rules. */
import Database from 'better-sqlite3';
import { chmodSync, existsSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isVfsError } from '../errors.js';
import { body, ctx, principal, storage } from '../vfs/testing.js';
import { ADMIN, built, gatedVfs, makeRig, until, USER_BITS, type SearchRig } from './testing.js';

let rig: SearchRig;
const find = async (keywords: string, c = ADMIN, parent = '/', scope = 0) =>
  (await rig.service.search(c, { parent, keywords, scope, page: 1, perPage: 100 })).hits.map((h) => (h.parent === '/' ? '' : h.parent) + '/' + h.name);

beforeEach(async () => {
  rig = await makeRig();
  const { core } = rig;
  for (const p of ['/m', '/n']) await core.storages.create(storage(p));
  for (const f of ['/m/a/report one.txt', '/m/a/b/report two.txt', '/m/secret/report three.txt', '/m/pub/report four.txt', '/n/report five.txt']) {
    await core.vfs.put(ADMIN, f, body('x'));
  }
});
afterEach(() => rig.cleanup());

const dbFile = () => join(rig.core.dir, 'search.db');
/** Every indexed row, without ids, in a stable order. */
function indexRows(): unknown[] {
  const db = new Database(dbFile(), { readonly: true });
  try {
    return db.prepare('SELECT parent, name, lname, is_dir, size FROM entries ORDER BY parent, name').all();
  } finally {
    db.close();
  }
}
/** FTS5's own check that the trigram index holds exactly the rows of the table (throws otherwise). */
function checkFts(): void {
  const db = new Database(dbFile());
  try {
    db.exec(`INSERT INTO names(names, rank) VALUES ('integrity-check', 1)`);
  } finally {
    db.close();
  }
}
/** Folders /m/f0 … /m/f{n-1} of `files` files each, written through the VFS (so indexed as they come). */
async function fill(folders: number, files: number): Promise<void> {
  for (let d = 0; d < folders; d++) {
    await Promise.all(Array.from({ length: files }, (_, i) => rig.core.vfs.put(ADMIN, `/m/f${d}/Item ${d}-${i} caf\u0065\u0301.txt`, body('x'.repeat(i % 7)))));
  }
}

describe('building', () => {
  it('indexes the tree through the VFS and reports progress', async () => {
    rig.service.clear();
    expect(await find('report')).toEqual([]);
    rig.service.build();
    await built(rig.service);
    expect(await find('report')).toEqual(['/n/report five.txt', '/m/pub/report four.txt', '/m/a/report one.txt', '/m/secret/report three.txt', '/m/a/b/report two.txt']);
    const p = rig.service.progress();
    expect(p).toMatchObject({ is_done: true, error: '' });
    expect(p.obj_count).toBe(11); // m, n, a, b, secret, pub and the five files
    expect(p.last_done_time).toMatch(/^\d{4}-/);
  });

  it('honours max_index_depth, ignore_paths and disable_index', async () => {
    await rig.core.storages.create(storage('/hidden-store', 'Memory', { disable_index: true }));
    await rig.core.vfs.put(ADMIN, '/hidden-store/report six.txt', body('x'));
    await rig.settings.save({ max_index_depth: '3', ignore_paths: '/m/pub\n/nope' });
    rig.service.build();
    await built(rig.service);
    expect(await find('report')).toEqual(['/n/report five.txt', '/m/a/report one.txt', '/m/secret/report three.txt']);
  });

  it('refuses a second build while one runs, and stop when idle', async () => {
    rig.service.build();
    expect(() => rig.service.build()).toThrow('index is running');
    await built(rig.service);
    await expect(rig.service.stop()).rejects.toThrow('index is not running');
  });

  it('a build interrupted by a restart resumes where it was', async () => {
    rig.service.build();
    await rig.service.close(); // the loop stops after its current folder; the job stays in the file
    const db = new Database(join(rig.core.dir, 'search.db'), { readonly: true });
    const left = db.prepare('SELECT count(*) FROM queue').pluck().get() as number;
    const job = db.prepare(`SELECT value FROM state WHERE key = 'job'`).pluck().get() as string;
    db.close();
    expect(left).toBeGreaterThan(0);
    expect(JSON.parse(job)).toMatchObject({ kind: 'build' });
    const s = rig.restart();
    expect(s.running).toBe(true);
    await built(s);
    expect(s.progress()).toMatchObject({ is_done: true, obj_count: 11 });
    expect(await find('report')).toHaveLength(5);
  });

  it('a build writes exactly the rows and FTS entries that VFS updates wrote, in several batches', async () => {
    await fill(4, 300); // more rows than one batch
    await rig.core.vfs.mkdir(ADMIN, '/n/Empty 中文 Folder');
    const incremental = indexRows();
    checkFts();
    const before = await find('item 3-29');
    rig.service.build();
    await built(rig.service);
    expect(rig.service.progress()).toMatchObject({ is_done: true, error: '', obj_count: incremental.length });
    expect(indexRows()).toEqual(incremental);
    checkFts();
    expect(await find('item 3-29')).toEqual(before);
    expect(before).toHaveLength(11); // 3-29 and 3-290 … 3-299
    expect(await find('中文 empty')).toEqual(['/n/Empty 中文 Folder']);
    // Again, through the writer thread the first build left (its file's tables were recreated meanwhile).
    rig.service.build();
    await built(rig.service);
    expect(rig.service.progress()).toMatchObject({ is_done: true, error: '', obj_count: incremental.length });
    expect(indexRows()).toEqual(incremental);
    checkFts();
  });

  it('a build paused after some batches were written resumes without losing or repeating entries', async () => {
    await fill(6, 120);
    const all = indexRows();
    rig.service.clear();
    await rig.service.close();
    const gated = gatedVfs(rig.core.vfs, '/m/f5');
    let s = rig.restart(gated.vfs);
    s.build();
    await until(() => s.progress().obj_count === all.length - 120); // all but the files of /m/f5 are written
    await s.close(); // /m/f5 is still being listed: it stays queued
    const db = new Database(dbFile(), { readonly: true });
    const queued = db.prepare('SELECT path FROM queue').pluck().all();
    db.close();
    expect(queued).toEqual(['/m/f5']);
    s = rig.restart();
    await built(s);
    expect(s.progress()).toMatchObject({ is_done: true, error: '', obj_count: all.length });
    expect(indexRows()).toEqual(all);
    checkFts();
  });

  it('VFS writes during a build are kept, the build\'s own rows too', async () => {
    await fill(3, 200);
    await rig.service.close();
    const gated = gatedVfs(rig.core.vfs, '/m/f2');
    const s = rig.restart(gated.vfs);
    s.build();
    await until(() => s.progress().obj_count > 0);
    // Written through the service's own connection while the build's writer thread has the file open.
    await Promise.all(Array.from({ length: 30 }, (_, i) => rig.core.vfs.put(ADMIN, `/m/f2/during ${i}.txt`, body('y'))));
    await Promise.all(Array.from({ length: 30 }, (_, i) => rig.core.vfs.put(ADMIN, `/n/late/during late ${i}.txt`, body('y'))));
    expect(await find('during late 17')).toEqual(['/n/late/during late 17.txt']);
    gated.open();
    await built(s);
    expect((await s.search(ADMIN, { parent: '/', keywords: 'during', scope: 2, page: 1, perPage: 1 })).total).toBe(60);
    expect((await s.search(ADMIN, { parent: '/m', keywords: 'item', scope: 0, page: 1, perPage: 1 })).total).toBe(600);
    checkFts();
  });

  it('removals and moves during a build: what the build listed before they happened is not brought back or lost', async () => {
    await rig.service.close();
    const vfs = rig.core.vfs;
    // The build lists /m/a, then (before the listing reaches the build) the file and a folder go.
    const list: typeof vfs.list = async (c, p, o) => {
      const listing = await vfs.list(c, p, o);
      if (p === '/m/a') {
        await vfs.remove(ADMIN, '/m/a/report one.txt');
        await vfs.moveTo(ADMIN, '/m/a/b', '/m/b moved');
      }
      return listing;
    };
    const view = new Proxy(vfs, { get: (t, k) => (k === 'list' ? list : (Reflect.get(t, k) as unknown) instanceof Function ? (Reflect.get(t, k) as (...a: unknown[]) => unknown).bind(t) : Reflect.get(t, k)) });
    const s = rig.restart(view);
    s.clear();
    s.build();
    await built(s);
    // The removed file and the moved folder's old paths are gone for good; the folder moved before
    // the build had written it is listed by the follow-up job.
    await until(() => !s.running);
    expect(await find('report')).toEqual(['/n/report five.txt', '/m/pub/report four.txt', '/m/secret/report three.txt', '/m/b moved/report two.txt']);
    checkFts();
  });

  it('replaces an index file of an older format and rebuilds it', async () => {
    await rig.service.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(dbFile() + suffix, { force: true });
    const old = new Database(dbFile());
    old.exec(`CREATE TABLE entries (id INTEGER PRIMARY KEY, parent TEXT NOT NULL, name TEXT NOT NULL, lname TEXT NOT NULL,
                is_dir INTEGER NOT NULL, size INTEGER NOT NULL, UNIQUE (parent, name));
              INSERT INTO entries (parent, name, lname, is_dir, size) VALUES ('/gone', 'report ghost.txt', 'report ghost.txt', 0, 1);`);
    old.close();
    const s = rig.restart();
    expect(s.running).toBe(true);
    await built(s);
    expect(await find('report')).toHaveLength(5);
    expect(await find('ghost')).toEqual([]);
    checkFts();
  });

  it('answers search not available while search_index is none', async () => {
    await rig.settings.save({ search_index: 'none' });
    const e = await rig.service.search(ADMIN, { parent: '/', keywords: 'x', scope: 0, page: 1, perPage: 1 }).catch((x: unknown) => x);
    expect(isVfsError(e, 'NOT_SUPPORTED') && e.message).toBe('search not available');
  });
});

describe('staying current', () => {
  it('applies every VFS write at once', async () => {
    const v = rig.core.vfs;
    await v.put(ADMIN, '/m/new/deep/fresh.bin', body('abc'));
    expect(await find('fresh')).toEqual(['/m/new/deep/fresh.bin']);
    expect(await find('deep', ADMIN, '/', 1)).toEqual(['/m/new/deep']);
    await v.mkdir(ADMIN, '/m/made dir');
    expect(await find('made')).toEqual(['/m/made dir']);
    await v.moveTo(ADMIN, '/m/new', '/m/made dir/moved');
    expect(await find('fresh')).toEqual(['/m/made dir/moved/deep/fresh.bin']);
    await v.copyTo(ADMIN, '/m/made dir/moved', '/m/copied');
    expect(await find('fresh')).toEqual(['/m/copied/deep/fresh.bin', '/m/made dir/moved/deep/fresh.bin']);
    await v.remove(ADMIN, '/m/made dir');
    expect(await find('fresh')).toEqual(['/m/copied/deep/fresh.bin']);
    await v.moveTo(ADMIN, '/m/copied/deep/fresh.bin', '/m/copied/deep/renamed.bin');
    expect(await find('fresh')).toEqual([]);
    expect(await find('renamed')).toEqual(['/m/copied/deep/renamed.bin']);
  });

  it('a deleted storage leaves the index, a storage mounted inside its path stays', async () => {
    const { core } = rig;
    const inner = await core.storages.create(storage('/m/a/inner'));
    await core.vfs.put(ADMIN, '/m/a/inner/report six.txt', body('x'));
    expect(await find('report six')).toEqual(['/m/a/inner/report six.txt']);
    const m = core.mounts.all().find((x) => x.record.mount_path === '/m')!;
    await core.storages.delete(m.record.id);
    expect(await find('report')).toEqual(['/n/report five.txt', '/m/a/inner/report six.txt']);
    expect(await find('inner', ADMIN, '/', 1)).toEqual(['/m/a/inner']);
    await core.storages.delete(inner.record.id);
    expect(await find('report')).toEqual(['/n/report five.txt']);
    expect(await find('a', ADMIN, '/m', 1)).toEqual([]);
  });

  it('a disabled storage is not answered (fs/get does not serve it) and comes back when enabled', async () => {
    const { core } = rig;
    await core.storages.create(storage('/m/a/inner'));
    await core.vfs.put(ADMIN, '/m/a/inner/report six.txt', body('x'));
    const all = await find('report');
    const m = core.mounts.all().find((x) => x.record.mount_path === '/m')!;
    await core.storages.disable(m.record.id);
    expect(await find('report')).toEqual(['/n/report five.txt', '/m/a/inner/report six.txt']);
    expect(await find('m', ADMIN, '/', 1)).toEqual([]); // nor its mount point
    const user = ctx(principal(USER_BITS));
    expect((await rig.service.search(user, { parent: '/m', keywords: 'report', scope: 0, page: 1, perPage: 10 })).total).toBe(1);
    await core.storages.enable(m.record.id);
    expect(await find('report')).toEqual(all);
  });

  it("a storage's mount path change drops its old paths, as a deletion does", async () => {
    const { core } = rig;
    const n = core.mounts.all().find((x) => x.record.mount_path === '/n')!;
    const r = await core.storages.update({ ...n.record, mount_path: '/n2' });
    expect(r.error).toBeUndefined();
    expect(await find('report five')).toEqual([]);
    expect(await find('n', ADMIN, '/', 1)).toEqual([]);
    // The new path is indexed like any other folder: admin/index/update, a build, or listings with auto_update_index.
    await core.vfs.put(ADMIN, '/n2/report seven.txt', body('x'));
    rig.service.update(['/n2']);
    await built(rig.service);
    expect(await find('report seven')).toEqual(['/n2/report seven.txt']);
    // Disabled while moved: the old path goes all the same.
    const m = core.mounts.all().find((x) => x.record.mount_path === '/m')!;
    await core.storages.update({ ...m.record, mount_path: '/m2', disabled: true });
    expect(await find('report')).toEqual(['/n2/report seven.txt']);
  });

  it('with auto_update_index, a listing refreshes what the index knows of that folder', async () => {
    const m = rig.core.mounts.all().find((x) => x.record.mount_path === '/m')!;
    const d = m.driver!;
    const dir = await d.get!('/a', {});
    await d.put!(dir, body('y'), { name: 'report behind.txt' }); // behind the VFS's back
    await d.remove!(await d.get!('/a/report one.txt', {}), {});
    await rig.core.vfs.list(ADMIN, '/m/a');
    expect(await find('behind')).toEqual([]); // auto_update_index is off
    await rig.settings.save({ auto_update_index: 'true' });
    await rig.core.vfs.list(ADMIN, '/m/a');
    expect(await find('behind')).toEqual(['/m/a/report behind.txt']);
    expect(await find('one')).toEqual([]);
    expect(await find('two')).toEqual(['/m/a/b/report two.txt']);
  });
});

describe('access rules', () => {
  beforeEach(async () => {
    await rig.core.metas.create({ path: '/m', hide: '^secret$', h_sub: false });
    await rig.core.metas.create({ path: '/m/a', password: 'pw', p_sub: true });
  });

  it('filters hidden entries and path passwords, and total counts only what is visible', async () => {
    const user = ctx(principal(USER_BITS));
    const r = await rig.service.search(user, { parent: '/', keywords: 'report', scope: 0, page: 1, perPage: 1 });
    expect(r.total).toBe(2);
    expect(await find('report', user)).toEqual(['/n/report five.txt', '/m/pub/report four.txt']);
    const withPw = ctx(principal(USER_BITS), 'rest', 'pw');
    expect(await find('report', withPw)).toEqual(['/n/report five.txt', '/m/pub/report four.txt', '/m/a/report one.txt', '/m/a/b/report two.txt']);
    expect(await find('report', ADMIN)).toHaveLength(5);
  });

  it('never leaves the base path, and reports absolute parents', async () => {
    const u = ctx(principal(0x3fff, '/m/pub'));
    const r = await rig.service.search(u, { parent: '/', keywords: 'report', scope: 0, page: 1, perPage: 10 });
    expect(r).toEqual({ total: 1, hits: [{ parent: '/m/pub', name: 'report four.txt', isDir: false, size: 1 }] });
    const e = await rig.service.search(u, { parent: '../a', keywords: 'report', scope: 0, page: 1, perPage: 10 }).catch((x: unknown) => x);
    expect(isVfsError(e, 'INVALID')).toBe(true);
  });
});

describe('limits and the file', () => {
  const req = (keywords: string, page = 1, perPage = 100) => rig.service.search(ADMIN, { parent: '/', keywords, scope: 0, page, perPage });

  it('refuses a keywords text or a number of keywords that could only cost, never match', async () => {
    await expect(req('a'.repeat(500_000))).rejects.toThrow('keywords too long: at most 512 characters');
    await expect(req(Array.from({ length: 1000 }, (_, i) => `k${i}`).join(' '))).rejects.toThrow(/^keywords too long/);
    const many = Array.from({ length: 33 }, (_, i) => `k${i}`).join(' ');
    const e = await req(many).catch((x: unknown) => x);
    expect(isVfsError(e, 'INVALID')).toBe(true);
    expect((e as Error).message).toBe('too many keywords: at most 32');
    expect((await req(Array.from({ length: 32 }, (_, i) => `k${i}`).join(' '))).total).toBe(0);
    expect((await req('report ' + ' '.repeat(400) + 'one')).total).toBe(1);
    expect((await req('REPORT report Report')).total).toBe(5); // duplicates count once
  });

  it('an absurd page answers an empty page with the total', async () => {
    expect(await req('report', 1e15, 1e5)).toEqual({ hits: [], total: 5 });
    expect(await req('report', Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)).toEqual({ hits: [], total: 5 });
  });

  it('search.db and its -wal and -shm are 0600, also when an older file was 0644', async () => {
    const modes = () => ['', '-wal', '-shm'].map((x) => statSync(dbFile() + x).mode & 0o777);
    await find('report');
    expect(modes()).toEqual([0o600, 0o600, 0o600]);
    await rig.service.close();
    for (const x of ['', '-wal', '-shm']) if (existsSync(dbFile() + x)) chmodSync(dbFile() + x, 0o644);
    rig.restart();
    expect(await find('report five')).toEqual(['/n/report five.txt']);
    expect(modes()).toEqual([0o600, 0o600, 0o600]);
  });
});
