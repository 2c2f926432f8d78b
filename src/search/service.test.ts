/** SearchService over a real VFS (Memory storages): building, resuming, staying current, access rules. */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isVfsError } from '../errors.js';
import { body, ctx, principal, storage } from '../vfs/testing.js';
import { ADMIN, built, makeRig, USER_BITS, type SearchRig } from './testing.js';

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
