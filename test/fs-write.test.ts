/** mkdir, rename, batch/regex rename, move, copy, recursive_move, remove, remove_empty_directory (alist-compat §10). */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ALL_FS, expectCode, makeUser, mkdir, names, ok, PERM, seed, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;
const disk = (p: string) => join(ts.dataDir, 'storage', p);
const post = (path: string, body: unknown, token = admin) => ts.api(path, { token, body });

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
afterAll(async () => ts?.close());

describe('mkdir', () => {
  it('creates parents; an existing folder is fine; a file in the way is 500 file exists', async () => {
    ok(await mkdir(ts, admin, '/mk/a/b'));
    expect(existsSync(disk('mk/a/b'))).toBe(true);
    ok(await mkdir(ts, admin, '/mk/a/b'));
    await seed(ts, admin, { '/mk/file': 'x' });
    expectCode(await mkdir(ts, admin, '/mk/file'), 500, 'file exists');
  });

  it('needs the write bit (403 permission denied)', async () => {
    const u = await makeUser(ts, admin, 'nowrite', 0);
    expectCode(await mkdir(ts, u, '/mk/denied'), 403, 'permission denied');
    expect(existsSync(disk('mk/denied'))).toBe(false);
  });
});

describe('rename', () => {
  it('renames a file', async () => {
    await seed(ts, admin, { '/rn/old.txt': 'o' });
    ok(await post('/api/fs/rename', { path: '/rn/old.txt', name: 'new.txt' }));
    expect(await names(ts, admin, '/rn')).toEqual(['new.txt']);
  });

  it('refuses names with /, \\, .., . or empty: 403 access using relative path is not allowed', async () => {
    await seed(ts, admin, { '/rn/keep.txt': 'k' });
    for (const name of ['../x', 'a/b', 'a\\b', '..', '.', '', 'a\0b']) {
      expectCode(await post('/api/fs/rename', { path: '/rn/keep.txt', name }), 403, 'access using relative path is not allowed');
    }
    expect(readFileSync(disk('rn/keep.txt'), 'utf8')).toBe('k');
  });

  it('an existing target is 403 file [name] exists unless overwrite', async () => {
    await seed(ts, admin, { '/rn2/a.txt': 'A', '/rn2/b.txt': 'B' });
    expectCode(await post('/api/fs/rename', { path: '/rn2/a.txt', name: 'b.txt' }), 403, 'file [b.txt] exists');
    ok(await post('/api/fs/rename', { path: '/rn2/a.txt', name: 'b.txt', overwrite: true }));
    expect(readFileSync(disk('rn2/b.txt'), 'utf8')).toBe('A');
  });

  it('needs the rename bit', async () => {
    await seed(ts, admin, { '/rn3/a.txt': 'A' });
    const u = await makeUser(ts, admin, 'norename', ALL_FS & ~PERM.RENAME);
    expectCode(await post('/api/fs/rename', { path: '/rn3/a.txt', name: 'z.txt' }, u), 403, 'permission denied');
  });
});

describe('batch_rename and regex_rename', () => {
  it('batch_rename renames pairs, skipping pairs with an empty name', async () => {
    await seed(ts, admin, { '/br/1.txt': '1', '/br/2.txt': '2', '/br/3.txt': '3' });
    ok(
      await post('/api/fs/batch_rename', {
        src_dir: '/br',
        rename_objects: [{ src_name: '1.txt', new_name: 'one.txt' }, { src_name: '2.txt', new_name: '' }, { src_name: '3.txt', new_name: 'three.txt' }],
      }),
    );
    expect(await names(ts, admin, '/br')).toEqual(['2.txt', 'one.txt', 'three.txt']);
  });

  it('batch_rename refuses traversal names', async () => {
    expectCode(
      await post('/api/fs/batch_rename', { src_dir: '/br', rename_objects: [{ src_name: 'one.txt', new_name: '../escaped.txt' }] }),
      403,
      'access using relative path is not allowed',
    );
  });

  it('regex_rename expands Go templates ($1, ${1}, ${name}, $$)', async () => {
    await seed(ts, admin, { '/rx/IMG_001.jpg': 'a', '/rx/IMG_002.jpg': 'b', '/rx/other.txt': 'c' });
    ok(await post('/api/fs/regex_rename', { src_dir: '/rx', src_name_regex: '^IMG_(?P<n>\\d+)\\.jpg$', new_name_regex: 'photo-${n}-$1-$$.jpg' }));
    expect(await names(ts, admin, '/rx')).toEqual(['other.txt', 'photo-001-001-$.jpg', 'photo-002-002-$.jpg']);
    // `$1x` is the (missing) group named "1x" in Go: it expands to nothing.
    ok(await post('/api/fs/regex_rename', { src_dir: '/rx', src_name_regex: '^(other)\\.txt$', new_name_regex: '$1x.${1}.md' }));
    expect(await names(ts, admin, '/rx')).toContain('.other.md');
  });

  it('regex_rename: a bad pattern is 500 error parsing regexp', async () => {
    const r = await post('/api/fs/regex_rename', { src_dir: '/rx', src_name_regex: '([a-', new_name_regex: 'x' });
    expect(r.code).toBe(500);
    expect(r.message).toMatch(/^error parsing regexp: /);
  });

  it('regex_rename follows Go ReplaceAllString: (.*) replaces once (no extra empty match at the end)', async () => {
    await seed(ts, admin, { '/rx3/report.txt': 'r', '/rx3/写真😀.jpg': 'p' });
    ok(await post('/api/fs/regex_rename', { src_dir: '/rx3', src_name_regex: '(.*)', new_name_regex: '2024_$1' }));
    expect(await names(ts, admin, '/rx3')).toEqual(['2024_report.txt', '2024_写真😀.jpg']);
  });

  it('regex_rename refuses look-around and backreferences like Go (500 error parsing regexp)', async () => {
    for (const [src_name_regex, message] of [
      ['a(?=b)', 'error parsing regexp: invalid or unsupported Perl syntax: `(?=`'],
      ['(a)\\1', 'error parsing regexp: invalid escape sequence: `\\1`'],
    ]) {
      const r = await post('/api/fs/regex_rename', { src_dir: '/rx', src_name_regex, new_name_regex: 'x' });
      expect([r.code, r.message]).toEqual([500, message]);
    }
  });

  it('regex_rename cannot produce a path', async () => {
    await seed(ts, admin, { '/rx2/a.txt': 'a' });
    expectCode(
      await post('/api/fs/regex_rename', { src_dir: '/rx2', src_name_regex: 'a', new_name_regex: '../../a' }),
      403,
      'access using relative path is not allowed',
    );
    expect(await names(ts, admin, '/rx2')).toEqual(['a.txt']);
  });
});

describe('move and copy', () => {
  it('moves names into another folder (data null)', async () => {
    await seed(ts, admin, { '/mv/src/a.txt': 'a', '/mv/src/b.txt': 'b' });
    ok(await mkdir(ts, admin, '/mv/dst'));
    const r = await post('/api/fs/move', { src_dir: '/mv/src', dst_dir: '/mv/dst', names: ['a.txt', 'b.txt'] });
    ok(r);
    expect(r.data).toBeNull();
    expect(await names(ts, admin, '/mv/dst')).toEqual(['a.txt', 'b.txt']);
    expect(await names(ts, admin, '/mv/src')).toEqual([]);
  });

  it('checks every name for an existing target before moving anything', async () => {
    await seed(ts, admin, { '/mv2/src/a.txt': 'a', '/mv2/src/b.txt': 'b', '/mv2/dst/b.txt': 'old' });
    expectCode(await post('/api/fs/move', { src_dir: '/mv2/src', dst_dir: '/mv2/dst', names: ['a.txt', 'b.txt'] }), 403, 'file [b.txt] exists');
    expect(await names(ts, admin, '/mv2/src')).toEqual(['a.txt', 'b.txt']);
    ok(await post('/api/fs/move', { src_dir: '/mv2/src', dst_dir: '/mv2/dst', names: ['a.txt', 'b.txt'], overwrite: true }));
    expect(readFileSync(disk('mv2/dst/b.txt'), 'utf8')).toBe('b');
  });

  it('empty names: 400 Empty file names (move, copy, remove)', async () => {
    for (const ep of ['/api/fs/move', '/api/fs/copy']) {
      expectCode(await post(ep, { src_dir: '/mv', dst_dir: '/mv/dst', names: [] }), 400, 'Empty file names');
    }
    expectCode(await post('/api/fs/remove', { dir: '/mv', names: [] }), 400, 'Empty file names');
  });

  it('copies synchronously within a storage (data null)', async () => {
    await seed(ts, admin, { '/cp/src/f.txt': 'copy me', '/cp/src/d/g.txt': 'g' });
    ok(await mkdir(ts, admin, '/cp/dst'));
    const r = await post('/api/fs/copy', { src_dir: '/cp/src', dst_dir: '/cp/dst', names: ['f.txt', 'd'] });
    ok(r);
    expect(r.data).toBeNull();
    expect(readFileSync(disk('cp/dst/f.txt'), 'utf8')).toBe('copy me');
    expect(readFileSync(disk('cp/dst/d/g.txt'), 'utf8')).toBe('g');
    expect(readFileSync(disk('cp/src/f.txt'), 'utf8')).toBe('copy me');
    expectCode(await post('/api/fs/copy', { src_dir: '/cp/src', dst_dir: '/cp/dst', names: ['f.txt'] }), 403, 'file [f.txt] exists');
  });

  it('move and copy need their bits', async () => {
    await seed(ts, admin, { '/mc/a.txt': 'a' });
    ok(await mkdir(ts, admin, '/mc/to'));
    const u = await makeUser(ts, admin, 'nomovecopy', PERM.WRITE | PERM.RENAME | PERM.REMOVE);
    expectCode(await post('/api/fs/move', { src_dir: '/mc', dst_dir: '/mc/to', names: ['a.txt'] }, u), 403, 'permission denied');
    expectCode(await post('/api/fs/copy', { src_dir: '/mc', dst_dir: '/mc/to', names: ['a.txt'] }, u), 403, 'permission denied');
  });

  it('names with traversal are refused', async () => {
    for (const name of ['../a.txt', '..', 'x/../../y', '/etc/passwd']) {
      expectCode(await post('/api/fs/move', { src_dir: '/mc', dst_dir: '/mc/to', names: [name] }), 403, 'access using relative path is not allowed');
    }
  });

  it('a move between storages is refused with a clear error', async () => {
    const mem = await ts.api<{ id: number }>('/api/admin/storage/create', { token: admin, body: { mount_path: '/mem', driver: 'Memory', addition: '{}' } });
    ok(mem);
    await seed(ts, admin, { '/xm/a.txt': 'a' });
    expectCode(await post('/api/fs/move', { src_dir: '/xm', dst_dir: '/mem', names: ['a.txt'] }), 500, "can't move files between two storages, try to copy");
    // A copy between storages runs as a task (decision 1): the answer carries it.
    const copied = await post('/api/fs/copy', { src_dir: '/xm', dst_dir: '/mem', names: ['a.txt'] });
    ok(copied);
    expect((copied.data as { tasks: Array<{ name: string }> }).tasks.map((t) => t.name)).toEqual(['copy [/](/xm/a.txt) to [/mem](/)']);
  });
});

describe('recursive_move', () => {
  it('flattens every file below src into dst and answers success', async () => {
    await seed(ts, admin, { '/rm/src/a.txt': 'a', '/rm/src/d1/b.txt': 'b', '/rm/src/d1/d2/c.txt': 'c' });
    ok(await mkdir(ts, admin, '/rm/dst'));
    const r = await post('/api/fs/recursive_move', { src_dir: '/rm/src', dst_dir: '/rm/dst' });
    expectCode(r, 200, 'success');
    expect(await names(ts, admin, '/rm/dst')).toEqual(['a.txt', 'b.txt', 'c.txt']);
    expect(await names(ts, admin, '/rm/src')).toEqual(['d1']);
  });

  it('conflict_policy cancel refuses before moving; skip keeps the existing', async () => {
    await seed(ts, admin, { '/rm2/src/a.txt': 'new-a', '/rm2/src/x/b.txt': 'b', '/rm2/dst/a.txt': 'old-a' });
    expectCode(await post('/api/fs/recursive_move', { src_dir: '/rm2/src', dst_dir: '/rm2/dst', conflict_policy: 'cancel' }), 403, 'file [a.txt] exists');
    expect(await names(ts, admin, '/rm2/dst')).toEqual(['a.txt']);
    ok(await post('/api/fs/recursive_move', { src_dir: '/rm2/src', dst_dir: '/rm2/dst', conflict_policy: 'skip' }));
    expect(await names(ts, admin, '/rm2/dst')).toEqual(['a.txt', 'b.txt']);
    expect(readFileSync(disk('rm2/dst/a.txt'), 'utf8')).toBe('old-a');
    ok(await post('/api/fs/recursive_move', { src_dir: '/rm2/src', dst_dir: '/rm2/dst', conflict_policy: 'overwrite' }));
    expect(readFileSync(disk('rm2/dst/a.txt'), 'utf8')).toBe('new-a');
  });
});

describe('remove and remove_empty_directory', () => {
  it('removes names; missing names are silently fine', async () => {
    await seed(ts, admin, { '/del/a.txt': 'a', '/del/d/b.txt': 'b' });
    ok(await post('/api/fs/remove', { dir: '/del', names: ['a.txt', 'd', 'missing.txt'] }));
    expect(await names(ts, admin, '/del')).toEqual([]);
  });

  it('needs the remove bit', async () => {
    await seed(ts, admin, { '/del2/a.txt': 'a' });
    const u = await makeUser(ts, admin, 'noremove', ALL_FS & ~PERM.REMOVE);
    expectCode(await post('/api/fs/remove', { dir: '/del2', names: ['a.txt'] }, u), 403, 'permission denied');
    expect(existsSync(disk('del2/a.txt'))).toBe(true);
  });

  it('refuses to remove the storage root', async () => {
    // AList answers 500; the VFS classifies it as FORBIDDEN (403) with AList's message.
    const r = await post('/api/fs/remove', { dir: '/', names: ['mem'] });
    expectCode(r, 403, 'delete root folder is not allowed, please goto the manage page to delete the storage instead');
    expect((await names(ts, admin, '/')).includes('mem')).toBe(true);
  });

  it('remove_empty_directory removes empty folders (and folders emptied that way), keeps src_dir', async () => {
    await seed(ts, admin, { '/ed/keep/f.txt': 'f' });
    for (const d of ['/ed/e1', '/ed/e2/e3/e4', '/ed/keep/e5']) ok(await mkdir(ts, admin, d));
    ok(await post('/api/fs/remove_empty_directory', { src_dir: '/ed' }));
    expect(await names(ts, admin, '/ed')).toEqual(['keep']);
    expect(await names(ts, admin, '/ed/keep')).toEqual(['f.txt']);
    ok(await mkdir(ts, admin, '/ed2'));
    ok(await post('/api/fs/remove_empty_directory', { src_dir: '/ed2' }));
    expect(existsSync(disk('ed2'))).toBe(true);
  });
});

describe('wrongly typed requests are 400 and touch nothing', () => {
  it('a path field that is not a string never falls back to the root', async () => {
    await seed(ts, admin, { '/victim': 'v', '/typed/sub/victim': 's', '/typed/mv/q.txt': 'q' });
    const cases: Array<[string, unknown, string]> = [
      ['/api/fs/remove', { dir: ['/typed/sub'], names: ['victim'] }, 'dir must be a string'],
      ['/api/fs/move', { src_dir: '/typed/mv', dst_dir: ['/typed/mv/dst'], names: ['q.txt'] }, 'dst_dir must be a string'],
      ['/api/fs/remove', { dir: '/typed/sub', names: ['victim', 7] }, 'names must be an array of strings'],
      ['/api/fs/mkdir', { path: 12 }, 'path must be a string'],
      ['/api/fs/batch_rename', { src_dir: '/typed', rename_objects: 'victim' }, 'rename_objects must be an array of objects'],
    ];
    for (const [route, body, message] of cases) {
      const r = await post(route, body);
      expect(r.code, route).toBe(400);
      expect(r.message).toContain(message);
    }
    expect(readFileSync(disk('victim'), 'utf8')).toBe('v');
    expect(readFileSync(disk('typed/sub/victim'), 'utf8')).toBe('s');
    expect(existsSync(disk('typed/mv/q.txt'))).toBe(true);
    expect(existsSync(disk('q.txt'))).toBe(false);
  });

  it('a body that is not a JSON object is 400, not an empty request acting on the root', async () => {
    await seed(ts, admin, { '/typed2/deep/file.txt': 'f' });
    ok(await mkdir(ts, admin, '/typed2/empty'));
    for (const body of [[1, 2], 123, true]) {
      for (const route of ['/api/fs/recursive_move', '/api/fs/remove_empty_directory', '/api/fs/remove']) {
        const r = await post(route, body);
        expect(r.code, `${route} ${JSON.stringify(body)}`).toBe(400);
      }
    }
    expect(readFileSync(disk('typed2/deep/file.txt'), 'utf8')).toBe('f');
    expect(existsSync(disk('typed2/empty'))).toBe(true);
  });
});
