import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isVfsError } from '../errors.js';
import { makeCore, storage, type TestCore } from './testing.js';
import { treeAccessOf } from './tree-access.js';

describe('tree access for drivers (Alias)', () => {
  let core: TestCore;
  beforeEach(async () => {
    core = await makeCore();
    await core.storages.create(storage('/m'));
  });
  afterEach(async () => core.cleanup());

  const codeOf = (p: Promise<unknown>) => p.then(() => 'ok', (e: unknown) => (isVfsError(e) ? e.code : String(e)));

  it('reads and writes through the VFS, with vpaths in Obj.path', async () => {
    const tree = treeAccessOf(core.vfs);
    const made = await tree.put('/m/a/b.txt', Readable.from([Buffer.from('hello')]), { size: 5 });
    expect(made).toMatchObject({ name: 'b.txt', path: '/m/a/b.txt', size: 5, isDir: false });
    expect((await tree.list('/m/a', {})).map((o) => o.path)).toEqual(['/m/a/b.txt']);
    await tree.moveTo('/m/a/b.txt', '/m/a/c.txt', {});
    expect((await tree.stat('/m/a/c.txt', {})).size).toBe(5);
  });

  it('keeps meta rules: hidden is NOT_FOUND, a path password is required', async () => {
    const tree = treeAccessOf(core.vfs);
    await tree.mkdir('/m/secret', {});
    await tree.mkdir('/m/locked', {});
    await core.metas.create({ path: '/m', hide: '^secret$' });
    await core.metas.create({ path: '/m/locked', password: 'pw' });
    expect((await tree.list('/m', {})).map((o) => o.name)).toEqual(['locked']);
    expect(await codeOf(tree.stat('/m/secret', {}))).toBe('NOT_FOUND');
    expect(await codeOf(tree.list('/m/locked', {}))).toBe('PASSWORD_REQUIRED');
  });
});
