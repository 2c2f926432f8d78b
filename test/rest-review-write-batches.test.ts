/**
 * A code review of the REST write routes (protocols/rest/routes/fs-write.ts and what they call in
 * src/vfs), each finding proven against the running server:
 * - a copy the VFS hands to a task (between storages) by a user without the write bit answered
 *   success with a task that then failed `permission denied`: the task's puts and mkdirs need the
 *   write the route never asked for (WebDAV asks it up front through checkTransfer).
 * - remove_empty_directory over a folder holding a password-protected subfolder failed halfway
 *   with the password error (the request has no password field): the empty folders listed before it
 *   were removed, those after it kept. A folder the user may not open is left alone, as a hidden one is.
 * - remove_empty_directory over a folder where a storage is mounted on a real (same-named) folder:
 *   the empty storage root was "removed", which failed the whole request with 403 `delete root
 *   folder is not allowed` (again halfway). A storage root is kept, as src_dir is.
 * - regex_rename mapping two names to one, and batch_rename giving two pairs one new name (or a
 *   name another entry keeps): the first renames ran, then 403 `file [x] exists`, a half-renamed
 *   folder. Like a bad name, a taken one is now found before the first rename.
 * - recursive_move over a folder where a storage is mounted on a real folder: the walk went into
 *   that storage (only mount points listed as virtual folders were skipped) and its files failed
 *   the request with 500 `can't move files between two storages` after the files before had moved.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { addMeta, expectCode, makeUser, mkdir, names, ok, PERM, seed, startRestServer } from './fs-helpers.js';
import { tasksOf } from './tasks-helpers.js';

let ts: TestServer;
let admin: string;
const disk = (p: string) => join(ts.dataDir, 'storage', p);
const post = (path: string, body: unknown, token = admin) => ts.api(path, { token, body });

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  ok(await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path: '/mem', driver: 'Memory', addition: '{}' } }));
});
afterAll(async () => ts?.close());

describe('copy between storages', () => {
  it('without the write bit is refused up front, not answered with a task bound to fail', async () => {
    await seed(ts, admin, { '/cw/a.txt': 'a' });
    ok(await mkdir(ts, admin, '/mem/cw'));
    const u = await makeUser(ts, admin, 'cw-copy-only', PERM.COPY);
    expectCode(await post('/api/fs/copy', { src_dir: '/cw', dst_dir: '/mem/cw', names: ['a.txt'] }, u), 403, 'permission denied');
    expect(await tasksOf(ts, u, 'copy', 'undone')).toEqual([]);
    expect(await tasksOf(ts, u, 'copy', 'done')).toEqual([]);
    // With the write bit the same copy runs as a task, as before.
    const w = await makeUser(ts, admin, 'cw-copy-write', PERM.COPY | PERM.WRITE);
    const r = await post('/api/fs/copy', { src_dir: '/cw', dst_dir: '/mem/cw', names: ['a.txt'] }, w);
    ok(r);
    expect((r.data as { tasks: unknown[] }).tasks).toHaveLength(1);
  });
});

describe('remove_empty_directory', () => {
  it('leaves a password-protected subfolder alone and prunes the rest', async () => {
    for (const d of ['/rp/a-empty', '/rp/m-locked', '/rp/z-empty']) ok(await mkdir(ts, admin, d));
    await addMeta(ts, admin, { path: '/rp/m-locked', password: 'secret' });
    const u = await makeUser(ts, admin, 'rp-remover', PERM.REMOVE);
    ok(await post('/api/fs/remove_empty_directory', { src_dir: '/rp' }, u));
    expect(await names(ts, admin, '/rp')).toEqual(['m-locked']);
    expect(existsSync(disk('rp/m-locked'))).toBe(true);
  });

  it('keeps an empty storage mounted on a real folder, and prunes the rest', async () => {
    ok(await mkdir(ts, admin, '/rm/z-empty'));
    mkdirSync(disk('rm/m'), { recursive: true }); // the Local folder the mount point shadows
    ok(await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path: '/rm/m', driver: 'Memory', addition: '{}' } }));
    ok(await post('/api/fs/remove_empty_directory', { src_dir: '/rm' }));
    expect(await names(ts, admin, '/rm')).toEqual(['m']);
    expect(await names(ts, admin, '/rm/m')).toEqual([]);
  });
});

describe('batch_rename and regex_rename: a new name taken within the batch renames nothing', () => {
  it('regex_rename mapping two names to one', async () => {
    await seed(ts, admin, { '/rx2/a1.txt': '1', '/rx2/a2.txt': '2', '/rx2/b.txt': 'b' });
    expectCode(await post('/api/fs/regex_rename', { src_dir: '/rx2', src_name_regex: '\\d', new_name_regex: '' }), 403, 'file [a.txt] exists');
    expect(await names(ts, admin, '/rx2')).toEqual(['a1.txt', 'a2.txt', 'b.txt']);
  });

  it('batch_rename giving two pairs one name, or a name another entry keeps', async () => {
    await seed(ts, admin, { '/br2/1.txt': '1', '/br2/2.txt': '2', '/br2/keep.txt': 'k' });
    const pairs = (...p: Array<[string, string]>) => ({ src_dir: '/br2', rename_objects: p.map(([src_name, new_name]) => ({ src_name, new_name })) });
    expectCode(await post('/api/fs/batch_rename', pairs(['1.txt', 'x.txt'], ['2.txt', 'x.txt'])), 403, 'file [x.txt] exists');
    expectCode(await post('/api/fs/batch_rename', pairs(['1.txt', 'y.txt'], ['2.txt', 'keep.txt'])), 403, 'file [keep.txt] exists');
    expect(await names(ts, admin, '/br2')).toEqual(['1.txt', '2.txt', 'keep.txt']);
    // A name freed earlier in the batch is free for a later pair.
    ok(await post('/api/fs/batch_rename', pairs(['keep.txt', 'k.txt'], ['1.txt', 'keep.txt'])));
    expect(await names(ts, admin, '/br2')).toEqual(['2.txt', 'k.txt', 'keep.txt']);
  });
});

describe('recursive_move', () => {
  it('stays out of a storage mounted on a real folder below src_dir', async () => {
    await seed(ts, admin, { '/rv/a.txt': 'a', '/rv/sub/b.txt': 'b' });
    ok(await mkdir(ts, admin, '/rvd'));
    mkdirSync(disk('rv/m'), { recursive: true }); // the Local folder the mount point shadows
    ok(await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path: '/rv/m', driver: 'Memory', addition: '{}' } }));
    await seed(ts, admin, { '/rv/m/x.txt': 'x' });
    ok(await post('/api/fs/recursive_move', { src_dir: '/rv', dst_dir: '/rvd', conflict_policy: 'cancel' }));
    expect(await names(ts, admin, '/rvd')).toEqual(['a.txt', 'b.txt']);
    expect(await names(ts, admin, '/rv/m')).toEqual(['x.txt']);
  });
});
