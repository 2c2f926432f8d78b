import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isVfsError } from '../errors.js';
import type { DriverDefinition } from '../../drivers/types.js';
import { memoryDefinition } from '../../drivers/memory/index.js';
import { makeCore, storage, type TestCore } from './testing.js';

const hanging: DriverDefinition = {
  config: { ...memoryDefinition.config, name: 'Hang' },
  options: [],
  create: () => ({
    init: () => new Promise<void>(() => undefined), // never settles and ignores the signal
    drop: async () => undefined,
    list: async () => [],
    link: async () => ({ kind: 'file', path: '/dev/null', size: 0 }),
  }),
};
const failing: DriverDefinition = {
  ...hanging,
  config: { ...memoryDefinition.config, name: 'Fail' },
  create: () => ({ ...hanging.create({}, null as never), init: async () => { throw new Error('backend says no'); } }),
};

describe('MountTable', () => {
  let core: TestCore;
  beforeEach(async () => {
    core = await makeCore([hanging, failing], 200);
  });
  afterEach(() => core.cleanup());

  const add = async (path: string, driver = 'Memory', extra = {}) => core.mounts.mount(await core.store.storages.insert(storage(path, driver, extra)));
  const where = async (vpath: string) => {
    const r = await core.mounts.resolve(vpath);
    return r.kind === 'mount' ? `${r.mount.record.mount_path}:${r.dpath}` : 'virtual';
  };
  const codeOf = (vpath: string) => core.mounts.resolve(vpath).then(() => '', (e) => (isVfsError(e) ? `${e.code}:${e.message}` : 'other'));

  it('matches the longest mount path on whole segments', async () => {
    await add('/a');
    await add('/a/b');
    await add('/ab');
    expect(await where('/a')).toBe('/a:/');
    expect(await where('/a/x/y')).toBe('/a:/x/y');
    expect(await where('/a/b/c')).toBe('/a/b:/c');
    expect(await where('/a/bc')).toBe('/a:/bc');
    expect(await where('/ab/c')).toBe('/ab:/c');
    expect(await where('/')).toBe('virtual');
    expect(await codeOf('/abc')).toBe('NOT_FOUND:object not found');
  });

  it('lists mount points as virtual folders, ordered by order then mount path', async () => {
    await add('/z/one', 'Memory', { order: 1 });
    await add('/y', 'Memory', { order: 1 });
    await add('/x/deep/er', 'Memory', { order: 5 });
    await add('/w', 'Memory', { order: 0, modified: '2020-01-01T00:00:00Z' });
    expect(await where('/x')).toBe('virtual');
    expect(await where('/x/deep')).toBe('virtual');
    const kids = core.mounts.childMounts('/');
    expect(kids.map((k) => k.name)).toEqual(['w', 'y', 'z', 'x']);
    expect(kids[0]).toMatchObject({ isDir: true, size: 0, vpath: '/w', virtual: true, modified: new Date('2020-01-01T00:00:00Z') });
    expect(core.mounts.childMounts('/x').map((k) => k.vpath)).toEqual(['/x/deep']);
  });

  it('a storage in error or disabled answers STORAGE_UNAVAILABLE, never its parent', async () => {
    await add('/');
    await add('/bad', 'Fail');
    await add('/off', 'Memory', { disabled: true });
    await add('/unknown', 'NoSuchDriver');
    expect(await codeOf('/bad/x')).toBe('STORAGE_UNAVAILABLE:storage not init: backend says no');
    expect(await codeOf('/off')).toBe('STORAGE_UNAVAILABLE:storage not init: disabled');
    expect(await codeOf('/unknown/f')).toBe('STORAGE_UNAVAILABLE:storage not init: failed get driver new: no driver named: NoSuchDriver');
    expect(await where('/offside')).toBe('/:/offside');
  });

  it('bounds a hanging init and keeps other storages working', async () => {
    const started = Date.now();
    const [slow, ok] = await Promise.all([add('/slow', 'Hang'), add('/ok')]);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(slow.status).toBe('init timed out after 200 ms');
    expect(ok.status).toBe('work');
    expect(await codeOf('/slow')).toMatch(/^STORAGE_UNAVAILABLE/);
  });

  it('unmount removes the path from the tree', async () => {
    const m = await add('/gone');
    await core.mounts.unmount(m.id);
    expect(await codeOf('/gone')).toBe('NOT_FOUND:object not found');
  });
});
