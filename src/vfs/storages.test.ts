import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ctx, makeCore, principal, storage, type TestCore } from './testing.js';

describe('StorageService', () => {
  let core: TestCore;
  beforeEach(async () => {
    core = await makeCore();
  });
  afterEach(() => core.cleanup());

  it('creates, cleans the mount path, normalises addition and reports live status', async () => {
    const root = join(core.dir, 'files');
    await mkdir(root);
    const { record, error } = await core.storages.create({ ...storage('//local/'), driver: 'Local', addition: JSON.stringify({ root_folder_path: root }) });
    expect(error).toBeUndefined();
    expect(record).toMatchObject({ mount_path: '/local', status: 'work', cache_expiration: 0, webdav_policy: 'native_proxy' });
    expect(JSON.parse(record.addition)).toEqual({
      root_folder_path: root, thumbnail: false, thumb_cache_folder: '', thumb_concurrency: '16', video_thumb_pos: '20%',
      show_hidden: true, mkdir_perm: '777', recycle_bin_path: 'delete permanently',
    });
    expect((await core.vfs.stat(ctx(principal(0)), '/local')).isDir).toBe(true);
  });

  it('refuses unknown drivers, bad options and duplicate mount paths before saving', async () => {
    await expect(core.storages.create(storage('/x', 'Nope'))).rejects.toThrow('failed get driver new: no driver named: Nope');
    await expect(core.storages.create({ ...storage('/x', 'Local'), addition: '{"show_hidden":"perhaps"}' })).rejects.toMatchObject({ code: 'INVALID' });
    await core.storages.create(storage('/x'));
    await expect(core.storages.create(storage('/x/'))).rejects.toMatchObject({ code: 'EXISTS', message: 'failed create storage in database: UNIQUE constraint failed: x_storages.mount_path' });
    expect((await core.storages.list()).length).toBe(1);
  });

  it('keeps a storage whose init fails, with the error as status', async () => {
    const { record, error } = await core.storages.create({ ...storage('/broken', 'Local'), addition: JSON.stringify({ root_folder_path: '/definitely/not/here' }) });
    expect(record.id).toBeGreaterThan(0);
    expect(error?.message).toBe('failed init storage but storage is already created: failed init storage: root folder /definitely/not/here not exists');
    expect((await core.storages.get(record.id)).status).toBe('root folder /definitely/not/here not exists');
    await expect(core.vfs.list(ctx(principal(0)), '/broken')).rejects.toMatchObject({ code: 'STORAGE_UNAVAILABLE' });
  });

  it('update: driver cannot change; a new mount path re-mounts; missing id', async () => {
    const { record } = await core.storages.create(storage('/old'));
    await expect(core.storages.update({ ...record, driver: 'Local' })).rejects.toThrow('driver cannot be changed');
    await core.storages.update({ ...record, mount_path: '/new' });
    const c = ctx(principal(0));
    expect(await core.vfs.stat(c, '/old').catch((e) => e.code)).toBe('NOT_FOUND');
    expect((await core.vfs.stat(c, '/new')).isDir).toBe(true);
    await expect(core.storages.update({ ...record, id: 999 })).rejects.toThrow('failed get old storage: record not found');
  });

  it('enable/disable with AList\'s messages; delete unmounts', async () => {
    const { record } = await core.storages.create(storage('/s'));
    await expect(core.storages.enable(record.id)).rejects.toThrow('this storage have enabled');
    await core.storages.disable(record.id);
    await expect(core.storages.disable(record.id)).rejects.toThrow('this storage have disabled');
    expect((await core.storages.get(record.id)).status).toBe('disabled');
    const c = ctx(principal(0));
    expect(await core.vfs.stat(c, '/s').catch((e) => e.code)).toBe('STORAGE_UNAVAILABLE');
    await core.storages.enable(record.id);
    expect((await core.vfs.stat(c, '/s')).isDir).toBe(true);
    await core.storages.delete(record.id);
    expect(await core.vfs.stat(c, '/s').catch((e) => e.code)).toBe('NOT_FOUND');
    await expect(core.storages.get(record.id)).rejects.toThrow('record not found');
  });

  it('lists by order then id, and loadAll mounts everything in the store', async () => {
    await core.store.storages.insert(storage('/b', 'Memory', { order: 2 }));
    await core.store.storages.insert(storage('/a', 'Memory', { order: 1 }));
    await core.store.storages.insert(storage('/c', 'Memory', { order: 1 }));
    const loading = core.storages.loadAll();
    expect(core.storages.loading).toBe(true);
    await loading;
    expect(core.storages.loading).toBe(false);
    expect((await core.storages.list()).map((s) => s.mount_path)).toEqual(['/a', '/c', '/b']);
    expect(core.mounts.all().map((m) => m.status)).toEqual(['work', 'work', 'work']);
  });
});
