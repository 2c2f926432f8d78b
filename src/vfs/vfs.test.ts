import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PERM } from '../auth/principal.js';
import { isVfsError } from '../errors.js';
import { collect } from '../../drivers/conformance/helpers.js';
import { templateDefinition } from '../../drivers/template/index.js';
import { memoryDefinition } from '../../drivers/memory/index.js';
import { MemoryDriver } from '../../drivers/memory/memory.js';
import type { DriverDefinition, Obj } from '../../drivers/types.js';
import { body, ctx, makeCore, principal, storage, type TestCore } from './testing.js';

const ALL = 0xfff;
const code = (p: Promise<unknown>) => p.then(() => 'ok', (e) => (isVfsError(e) ? e.code : `other: ${e}`));

describe('Vfs', () => {
  let core: TestCore;
  const admin = ctx(principal(ALL));
  beforeEach(async () => {
    core = await makeCore([templateDefinition as unknown as DriverDefinition]);
    for (const [path, driver] of [['/m', 'Memory'], ['/m/inner', 'Memory'], ['/n', 'Memory'], ['/t', 'Template'], ['/deep/x', 'Memory']] as const) {
      await core.storages.create({ ...storage(path, driver), addition: driver === 'Template' ? '{}' : undefined });
    }
    await core.vfs.put(admin, '/m/dir/file.txt', body('hello world'));
  });
  afterEach(() => core.cleanup());

  it('lists real objects, then mount points, and the root as virtual', async () => {
    const root = await core.vfs.list(admin, '/');
    expect(root.dir).toMatchObject({ name: 'root', virtual: true });
    expect(root.entries.map((e) => e.name)).toEqual(['deep', 'm', 'n', 't']);
    expect(root.storage).toBeUndefined();
    const m = await core.vfs.list(admin, '/m');
    expect(m.entries.map((e) => [e.name, e.vpath, !!e.virtual])).toEqual([['dir', '/m/dir', false], ['inner', '/m/inner', true]]);
    expect(m.storage?.driverName).toBe('Memory');
    await core.vfs.mkdir(admin, '/m/inner-real');
    expect((await core.vfs.stat(admin, '/deep')).virtual).toBe(true);
  });

  it('reads whole files and ranges', async () => {
    const r = await core.vfs.read(admin, '/m/dir/file.txt', { start: 6, end: 100 });
    expect([r.start, r.end]).toEqual([6, 10]);
    expect((await collect(r.stream)).toString()).toBe('world');
    expect(await code(core.vfs.read(admin, '/m/dir/file.txt', { start: 11 }))).toBe('INVALID');
    expect(await code(core.vfs.read(admin, '/m/dir'))).toBe('IS_A_DIR');
    expect(await code(core.vfs.read(admin, '/'))).toBe('IS_A_DIR');
  });

  it('joins the base path once and reports base-path vpaths', async () => {
    const u = ctx(principal(ALL, '/m/dir'));
    expect((await core.vfs.stat(u, '/file.txt')).vpath).toBe('/m/dir/file.txt');
    expect((await core.vfs.list(u, '/')).entries.map((e) => e.vpath)).toEqual(['/m/dir/file.txt']);
    expect(await code(core.vfs.stat(u, '../../n'))).toBe('INVALID');
  });

  it('put: creates parents, refuses folders and honours overwrite=false', async () => {
    await core.vfs.put(admin, '/n/a/b/c.txt', body('abc'));
    expect((await core.vfs.stat(admin, '/n/a/b')).isDir).toBe(true);
    expect(await code(core.vfs.put(admin, '/n/a', body('x')))).toBe('IS_A_DIR');
    expect(await code(core.vfs.put(admin, '/n', body('x')))).toBe('IS_A_DIR');
    expect(await code(core.vfs.put(admin, '/n/a/b/c.txt', body('x'), { overwrite: false }))).toBe('EXISTS');
    await core.vfs.put(admin, '/n/a/b/c.txt', body('new'));
    expect((await collect((await core.vfs.read(admin, '/n/a/b/c.txt')).stream)).toString()).toBe('new');
  });

  it('put with parents: false needs the folder, and tells whether it replaced the target', async () => {
    const seen: boolean[] = [];
    const onTarget = (existed: boolean) => void seen.push(existed);
    expect(await code(core.vfs.put(admin, '/n/missing/f.txt', body('x'), { parents: false, onTarget }))).toBe('NOT_A_DIR');
    expect(await code(core.vfs.stat(admin, '/n/missing'))).toBe('NOT_FOUND');
    expect(await code(core.vfs.put(admin, '/m/dir/file.txt/f.txt', body('x'), { parents: false, onTarget }))).toBe('NOT_A_DIR');
    expect(seen).toEqual([]); // refused before the body was taken
    await core.vfs.put(admin, '/m/dir/new.txt', body('a'), { parents: false, onTarget });
    await core.vfs.put(admin, '/m/dir/new.txt', body('b'), { parents: false, onTarget });
    expect(seen).toEqual([false, true]);
  });

  it('mkdir is idempotent for folders and EXISTS over files', async () => {
    expect((await core.vfs.mkdir(admin, '/m/dir')).isDir).toBe(true);
    expect(await code(core.vfs.mkdir(admin, '/m/dir/file.txt'))).toBe('EXISTS');
    expect((await core.vfs.mkdir(admin, '/n/x/y/z')).vpath).toBe('/n/x/y/z');
  });

  it('moves, renames and copies inside a storage; across storages is CROSS_MOUNT', async () => {
    await core.vfs.moveTo(admin, '/m/dir/file.txt', '/m/dir/renamed.txt');
    await core.vfs.mkdir(admin, '/m/other');
    const moved = await core.vfs.moveTo(admin, '/m/dir/renamed.txt', '/m/other/final.txt');
    expect(moved.vpath).toBe('/m/other/final.txt');
    await core.vfs.copyTo(admin, '/m/other/final.txt', '/m/other/copy.txt');
    await core.vfs.copyTo(admin, '/m/other', '/m/dir/other');
    expect((await core.vfs.list(admin, '/m/dir/other')).entries.map((e) => e.name)).toEqual(['copy.txt', 'final.txt']);
    expect(await code(core.vfs.copyTo(admin, '/m/other/final.txt', '/m/other/copy.txt'))).toBe('EXISTS');
    await core.vfs.copyTo(admin, '/m/other/final.txt', '/m/other/copy.txt', { overwrite: true });
    expect(await code(core.vfs.moveTo(admin, '/m/other', '/m/other/sub'))).toBe('INVALID');
    expect(await code(core.vfs.moveTo(admin, '/m/other/final.txt', '/n/final.txt'))).toBe('CROSS_MOUNT');
    expect(await code(core.vfs.copyTo(admin, '/m/other/final.txt', '/n/final.txt'))).toBe('CROSS_MOUNT');
    expect(await code(core.vfs.moveTo(admin, '/m/other/final.txt', '/m/inner/final.txt'))).toBe('CROSS_MOUNT');
  });

  it('a move under a new name that fails half-way is undone (nothing left under a temporary name)', async () => {
    // A Memory driver whose rename to `y` fails: the last step of every path moveAcross can take.
    const flaky: DriverDefinition = {
      ...(memoryDefinition as unknown as DriverDefinition),
      config: { ...memoryDefinition.config, name: 'FlakyMemory' },
      create: () => {
        const d = new MemoryDriver();
        const rename = d.rename.bind(d);
        d.rename = (obj: Obj, name: string) => (name === 'y' ? Promise.reject(new Error('backend went away')) : rename(obj, name));
        return d;
      },
    };
    const own = await makeCore([flaky]);
    try {
      await own.storages.create(storage('/f', 'FlakyMemory'));
      for (const p of ['/f/ma/x', '/f/ma/y', '/f/mb/x', '/f/ma/f']) await own.vfs.put(admin, p, body(p));
      expect(await code(own.vfs.moveTo(admin, '/f/ma/x', '/f/mb/y'))).toBe('UPSTREAM'); // taken on both sides: temporary name
      expect(await code(own.vfs.moveTo(admin, '/f/ma/f', '/f/mb/y'))).toBe('UPSTREAM'); // move, then rename
      const ls = async (p: string) => (await own.vfs.list(admin, p)).entries.map((e) => e.name).sort();
      expect([await ls('/f/ma'), await ls('/f/mb')]).toEqual([['f', 'x', 'y'], ['x']]);
      expect((await collect((await own.vfs.read(admin, '/f/ma/x')).stream)).toString()).toBe('/f/ma/x');
    } finally {
      await own.cleanup();
    }
  });

  it('refuses to remove storage roots and virtual folders with AList\'s message', async () => {
    for (const p of ['/m', '/deep', '/', '/m/inner']) {
      await expect(core.vfs.remove(admin, p)).rejects.toMatchObject({
        code: 'FORBIDDEN', message: 'delete root folder is not allowed, please goto the manage page to delete the storage instead',
      });
    }
    await core.vfs.remove(admin, '/m/dir');
    expect(await code(core.vfs.stat(admin, '/m/dir/file.txt'))).toBe('NOT_FOUND');
  });

  it('refuses to remove a user\'s own root (the base path folder): whatever the protocol, nobody deletes their home', async () => {
    await core.vfs.put(admin, '/m/home/carol/f.txt', body('x'));
    const carol = ctx(principal(ALL, '/m/home/carol'));
    for (const p of ['/', '', '.', '/./']) expect(await code(core.vfs.remove(carol, p))).toBe('FORBIDDEN');
    expect((await core.vfs.stat(admin, '/m/home/carol/f.txt')).size).toBe(1);
    await core.vfs.remove(carol, '/f.txt'); // what is inside stays hers to remove
    expect(await code(core.vfs.stat(admin, '/m/home/carol/f.txt'))).toBe('NOT_FOUND');
  });

  it('answers NOT_SUPPORTED for a missing capability, after the permission checks', async () => {
    await core.vfs.put(admin, '/t/f', body('x'));
    expect(await code(core.vfs.moveTo(admin, '/t/f', '/t/g'))).toBe('NOT_SUPPORTED');
    expect(await code(core.vfs.moveTo(ctx(principal(0)), '/t/f', '/t/g'))).toBe('FORBIDDEN');
    expect(await code(core.vfs.setModified(admin, '/t/f', new Date()))).toBe('NOT_SUPPORTED');
  });

  describe('permission matrix', () => {
    const without = (bit: number) => ctx(principal(ALL & ~bit));
    const cases: Array<[string, number, (c: ReturnType<typeof ctx>) => Promise<unknown>, string]> = [
      ['mkdir', PERM.WRITE, (c) => core.vfs.mkdir(c, '/m/newdir'), 'READ_ONLY'],
      ['put', PERM.WRITE, (c) => core.vfs.put(c, '/m/new.txt', body('x')), 'READ_ONLY'],
      ['setModified', PERM.WRITE, (c) => core.vfs.setModified(c, '/m/dir/file.txt', new Date()), 'READ_ONLY'],
      ['rename', PERM.RENAME, (c) => core.vfs.moveTo(c, '/m/dir/file.txt', '/m/dir/r.txt'), 'FORBIDDEN'],
      ['move', PERM.MOVE, (c) => core.vfs.moveTo(c, '/m/dir/file.txt', '/m/file.txt'), 'FORBIDDEN'],
      ['move+rename', PERM.RENAME, (c) => core.vfs.moveTo(c, '/m/dir/file.txt', '/m/other.txt'), 'FORBIDDEN'],
      ['copy', PERM.COPY, (c) => core.vfs.copyTo(c, '/m/dir/file.txt', '/m/file.txt'), 'FORBIDDEN'],
      ['remove', PERM.REMOVE, (c) => core.vfs.remove(c, '/m/dir/file.txt'), 'FORBIDDEN'],
    ];
    for (const [name, bit, op, denied] of cases) {
      it(`${name}: ${denied} without its bit, allowed with it`, async () => {
        expect(await code(op(without(bit)))).toBe(denied);
        expect(await code(op(admin))).toBe('ok');
      });
      it(`${name}: needs the manage bit on WebDAV and SFTP`, async () => {
        expect(await code(op(ctx(principal(ALL & ~PERM.WEBDAV_MANAGE), 'webdav')))).toBe('FORBIDDEN');
        expect(await code(op(ctx(principal(ALL & ~PERM.SFTP_MANAGE), 'sftp')))).toBe('FORBIDDEN');
        expect(await code(op(ctx(principal(ALL), 'sftp')))).toBe('ok');
      });
    }

    it('moving without renaming needs only the move bit', async () => {
      await core.vfs.mkdir(admin, '/m/to');
      expect(await code(core.vfs.moveTo(without(PERM.RENAME), '/m/dir/file.txt', '/m/to/file.txt'))).toBe('ok');
    });

    it('a meta write rule lets a user without bit3 create, and refresh', async () => {
      const u = ctx(principal(0));
      await core.metas.create({ path: '/m/dir', write: true });
      expect(await code(core.vfs.put(u, '/m/dir/up.txt', body('x')))).toBe('ok');
      expect(await code(core.vfs.put(u, '/m/up.txt', body('x')))).toBe('READ_ONLY');
      expect(await code(core.vfs.list(u, '/m/dir', { refresh: true }))).toBe('ok');
      expect(await code(core.vfs.list(u, '/m', { refresh: true }))).toBe('READ_ONLY');
      expect((await core.vfs.list(u, '/m/dir')).facts.write).toBe(true);
    });

    it('hidden paths are NOT_FOUND for every operation and vanish from listings', async () => {
      await core.metas.create({ path: '/m', hide: '^dir$' });
      const u = ctx(principal(ALL & ~PERM.SEE_HIDDEN));
      expect((await core.vfs.list(u, '/m')).entries.map((e) => e.name)).toEqual(['inner']);
      for (const op of [
        core.vfs.stat(u, '/m/dir'), core.vfs.list(u, '/m/dir'), core.vfs.read(u, '/m/dir/file.txt'), core.vfs.put(u, '/m/dir/x', body('x')),
        core.vfs.remove(u, '/m/dir/file.txt'), core.vfs.moveTo(u, '/m/dir/file.txt', '/m/x'), core.vfs.link(u, '/m/dir/file.txt'),
      ]) expect(await code(op)).toBe('NOT_FOUND');
      expect((await core.vfs.list(admin, '/m')).entries.map((e) => e.name)).toEqual(['dir', 'inner']);
    });

    it('path passwords: PASSWORD_REQUIRED without it (WebDAV/SFTP have none), bit1 bypasses', async () => {
      await core.metas.create({ path: '/m/dir', password: 'pw' });
      const u = principal(ALL & ~PERM.NO_PASSWORD);
      expect(await code(core.vfs.list(ctx(u), '/m/dir'))).toBe('PASSWORD_REQUIRED');
      expect(await code(core.vfs.list(ctx(u, 'webdav'), '/m/dir'))).toBe('PASSWORD_REQUIRED');
      expect(await code(core.vfs.list(ctx(u, 'rest', 'pw'), '/m/dir'))).toBe('ok');
      expect(await code(core.vfs.list(ctx(principal(ALL), 'sftp'), '/m/dir'))).toBe('ok');
    });
  });
});
