/**
 * A code review of the REST adapter (protocols/rest) against api-spec.md, alist-compat.md and
 * AList v3's handlers, each finding proven against the running server.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { expectCode, makeUser, mkdir, ok, seed, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;
const post = (path: string, body: unknown, token = admin) => ts.api(path, { token, body });
const tree = (p: string) => readdirSync(join(ts.dataDir, 'storage', p), { recursive: true }).map(String).sort();

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
afterAll(async () => ts?.close());

describe('the route permission bit comes first (AList fsmanage.go / fsbatch.go check it right after binding)', () => {
  // Without the bit AList answers 403 `permission denied` whatever else the request holds: never
  // `file [x] exists` (which tells the user to try again with overwrite), never a success.
  it('rename, batch_rename, regex_rename without bit4', async () => {
    await seed(ts, admin, { '/pb/a.txt': 'a', '/pb/b.txt': 'b' });
    const u = await makeUser(ts, admin, 'pb-none', 0);
    expectCode(await post('/api/fs/rename', { path: '/pb/a.txt', name: 'b.txt' }, u), 403, 'permission denied');
    expectCode(await post('/api/fs/rename', { path: '/pb/a.txt', name: 'a.txt' }, u), 403, 'permission denied');
    expectCode(await post('/api/fs/batch_rename', { src_dir: '/pb', rename_objects: [] }, u), 403, 'permission denied');
    expectCode(await post('/api/fs/regex_rename', { src_dir: '/pb', src_name_regex: 'nomatch', new_name_regex: 'x' }, u), 403, 'permission denied');
    expect(tree('pb')).toEqual(['a.txt', 'b.txt']);
  });

  it('move and copy onto a taken name without bit5 / bit6', async () => {
    await seed(ts, admin, { '/pm/src/a.txt': 'new', '/pm/dst/a.txt': 'old' });
    const u = await makeUser(ts, admin, 'pm-none', 0);
    expectCode(await post('/api/fs/move', { src_dir: '/pm/src', dst_dir: '/pm/dst', names: ['a.txt'] }, u), 403, 'permission denied');
    expectCode(await post('/api/fs/copy', { src_dir: '/pm/src', dst_dir: '/pm/dst', names: ['a.txt'] }, u), 403, 'permission denied');
    // The bit of the other operation does not stand in for it.
    const copier = await makeUser(ts, admin, 'pm-copy', 64);
    expectCode(await post('/api/fs/move', { src_dir: '/pm/src', dst_dir: '/pm/dst', names: ['a.txt'] }, copier), 403, 'permission denied');
    expect(tree('pm')).toEqual(['dst', 'dst/a.txt', 'src', 'src/a.txt']);
  });

  it('recursive_move without bit5 and remove_empty_directory without bit7, even when nothing would change', async () => {
    await seed(ts, admin, { '/pr/keep/a.txt': 'a' });
    await mkdir(ts, admin, '/pr/to');
    const u = await makeUser(ts, admin, 'pr-none', 0);
    expectCode(await post('/api/fs/recursive_move', { src_dir: '/pr/to', dst_dir: '/pr/keep' }, u), 403, 'permission denied');
    expectCode(await post('/api/fs/remove_empty_directory', { src_dir: '/pr/keep' }, u), 403, 'permission denied');
    // With the bits the same calls succeed.
    const v = await makeUser(ts, admin, 'pr-all', 32 | 128);
    ok(await post('/api/fs/recursive_move', { src_dir: '/pr/to', dst_dir: '/pr/keep' }, v));
    ok(await post('/api/fs/remove_empty_directory', { src_dir: '/pr/keep' }, v));
    expect(tree('pr')).toEqual(['keep', 'keep/a.txt', 'to']);
  });
});
