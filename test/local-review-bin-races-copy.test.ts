/** Code review of the Local driver, proved over the real server: recycle bin, copy, watcher. */
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { mountTmpfs } from './small-disk.js';
import { tempFolders } from './temp-folders.js';

let ts: TestServer;
let admin: string;

const post = <T = unknown>(path: string, body: unknown = {}) => ts.api<T>(path, { token: admin, body });
const local = (mount_path: string, addition: Record<string, unknown>) =>
  post<{ id: number }>('/api/admin/storage/create', { mount_path, driver: 'Local', addition: JSON.stringify(addition) });

/** AList's recycle-bin clash suffix for time `t` (local time, as the driver writes it). */
function stampAt(t: number): string {
  const d = new Date(t);
  const p = (n: number) => String(n).padStart(2, '0');
  return `_${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
const temp = tempFolders();
const tempDir = temp.make;
afterAll(async () => {
  await ts?.close();
  temp.removeAll();
});

describe('mkdir_perm', () => {
  it('a mode that is not octal digits is refused at init, never read as another mode', async () => {
    for (const [i, perm] of ['0o755', '78', 'rwx'].entries()) {
      const root = tempDir('tg-rl-root-');
      const r = await local(`/perm${i}`, { root_folder_path: root, mkdir_perm: perm });
      expect(r.code, perm).toBe(500);
      expect(r.message).toContain(`mkdir_perm ${perm} is not an octal mode`);
    }
  });
});

describe('recycle bin', () => {
  it('a delete never replaces what the bin already holds under the stamped name', async () => {
    const root = tempDir('tg-rl-root-');
    const bin = tempDir('tg-rl-bin-');
    ok(await local('/bin1', { root_folder_path: root, recycle_bin_path: bin }));
    // Earlier deletes of a.txt: the plain name and the stamped names of the seconds this one may run in.
    writeFileSync(join(bin, 'a.txt'), 'first');
    const now = Date.now();
    for (let s = -1; s <= 30; s++) writeFileSync(join(bin, 'a.txt' + stampAt(now + s * 1000)), 'second');
    writeFileSync(join(root, 'a.txt'), 'third');
    ok(await post('/api/fs/remove', { dir: '/bin1', names: ['a.txt'] }));
    expect(existsSync(join(root, 'a.txt'))).toBe(false);
    const contents = readdirSync(bin).map((n) => readFileSync(join(bin, n), 'utf8'));
    expect(contents.filter((c) => c === 'second')).toHaveLength(32);
    expect(contents.filter((c) => c === 'third')).toHaveLength(1);
    expect(contents.filter((c) => c === 'first')).toHaveLength(1);
  });
  it('deletes of one name from many folders at once all land in the bin', async () => {
    const root = tempDir('tg-rl-root-');
    const bin = tempDir('tg-rl-bin-');
    ok(await local('/bin3', { root_folder_path: root, recycle_bin_path: bin }));
    const n = 16;
    for (let i = 0; i < n; i++) {
      mkdirSync(join(root, `d${i}`));
      writeFileSync(join(root, `d${i}`, 'same.txt'), `copy ${i}`);
    }
    const rs = await Promise.all(Array.from({ length: n }, (_, i) => post('/api/fs/remove', { dir: `/bin3/d${i}`, names: ['same.txt'] })));
    for (const r of rs) ok(r);
    const kept = readdirSync(bin).map((f) => readFileSync(join(bin, f), 'utf8')).sort();
    expect(kept).toEqual(Array.from({ length: n }, (_, i) => `copy ${i}`).sort());
  });

  it('a file replaced by a copy goes to the bin under its own name', async () => {
    const root = tempDir('tg-rl-root-');
    const bin = tempDir('tg-rl-bin-');
    ok(await local('/bin2', { root_folder_path: root, recycle_bin_path: bin }));
    mkdirSync(join(root, 'from'));
    writeFileSync(join(root, 'from', 'report.txt'), 'new');
    writeFileSync(join(root, 'report.txt'), 'old');
    ok(await post('/api/fs/copy', { src_dir: '/bin2/from', dst_dir: '/bin2', names: ['report.txt'], overwrite: true }));
    expect(readFileSync(join(root, 'report.txt'), 'utf8')).toBe('new');
    expect(readdirSync(bin)).toEqual(['report.txt']);
    expect(readFileSync(join(bin, 'report.txt'), 'utf8')).toBe('old');
  });
});

describe('rename and move to one name at once', () => {
  it('one wins, the others are refused, no file is lost', async () => {
    const root = tempDir('tg-rl-root-');
    ok(await local('/race', { root_folder_path: root }));
    const n = 16;
    for (let i = 0; i < n; i++) writeFileSync(join(root, `f${i}.txt`), `file ${i}`);
    const rs = await Promise.all(Array.from({ length: n }, (_, i) => post('/api/fs/rename', { path: `/race/f${i}.txt`, name: 'same.txt' })));
    expect(rs.filter((r) => r.code === 200)).toHaveLength(1);
    const kept = readdirSync(root).map((f) => readFileSync(join(root, f), 'utf8')).sort();
    expect(kept).toEqual(Array.from({ length: n }, (_, i) => `file ${i}`).sort());
  });
});

describe('copy', () => {
  it('copying a link to a file leaves the linked file\'s times alone', async () => {
    const root = tempDir('tg-rl-root-');
    ok(await local('/cl', { root_folder_path: root }));
    const real = join(root, 'real.txt');
    writeFileSync(real, 'content');
    const old = new Date('2001-02-03T04:05:06Z');
    utimesSync(real, old, old);
    symlinkSync(real, join(root, 'ln.txt')); // absolute: the copy still reaches it from another folder
    mkdirSync(join(root, 'sub'));
    ok(await post('/api/fs/copy', { src_dir: '/cl', dst_dir: '/cl/sub', names: ['ln.txt'] }));
    expect(readFileSync(join(root, 'sub', 'ln.txt'), 'utf8')).toBe('content');
    expect(statSync(real).mtime.toISOString()).toBe(old.toISOString());
  });

  it('a relative link to a file copied into another folder is the file there, as listed', async () => {
    const root = tempDir('tg-rl-root-');
    ok(await local('/cr', { root_folder_path: root }));
    writeFileSync(join(root, 'real.txt'), 'content');
    symlinkSync('real.txt', join(root, 'rel.txt'));
    mkdirSync(join(root, 'sub'));
    ok(await post('/api/fs/copy', { src_dir: '/cr', dst_dir: '/cr/sub', names: ['rel.txt'] }));
    expect(lstatSync(join(root, 'sub', 'rel.txt')).isFile()).toBe(true);
    expect(readFileSync(join(root, 'sub', 'rel.txt'), 'utf8')).toBe('content');
  });

  it('a copied folder keeps its mode (a private folder does not become readable by all)', async () => {
    const root = tempDir('tg-rl-root-');
    ok(await local('/cm', { root_folder_path: root }));
    mkdirSync(join(root, 'private'));
    writeFileSync(join(root, 'private', 'secret.txt'), 's');
    chmodSync(join(root, 'private'), 0o700);
    mkdirSync(join(root, 'to'));
    ok(await post('/api/fs/copy', { src_dir: '/cm', dst_dir: '/cm/to', names: ['private'] }));
    expect(readFileSync(join(root, 'to', 'private', 'secret.txt'), 'utf8')).toBe('s');
    expect(statSync(join(root, 'to', 'private')).mode & 0o7777).toBe(0o700);
  });
});

describe('a move or delete onto another file system that runs out of space', () => {
  let root: string;
  let small: string;
  let unmount: (() => void) | undefined;
  const big = Buffer.alloc(1536 * 1024, 7); // more than the whole small disk
  beforeAll(async () => {
    root = tempDir('tg-rl-xdev-');
    small = join(root, 'small');
    mkdirSync(small);
    unmount = mountTmpfs(small, '1m');
    ok(await local('/xdev', { root_folder_path: root, recycle_bin_path: join(small, 'bin') }));
  });
  afterAll(() => unmount?.());

  it('a folder moved across leaves no partial folder under its name', async () => {
    mkdirSync(join(root, 'tree'));
    writeFileSync(join(root, 'tree', 'a.bin'), big.subarray(0, 600 * 1024));
    writeFileSync(join(root, 'tree', 'b.bin'), big.subarray(0, 600 * 1024));
    const r = await post('/api/fs/move', { src_dir: '/xdev', dst_dir: '/xdev/small', names: ['tree'] });
    expect(r.code).toBe(500);
    expect(readdirSync(small).filter((n) => n !== 'bin')).toEqual([]);
    expect(readdirSync(join(root, 'tree')).sort()).toEqual(['a.bin', 'b.bin']);
  });

  it('a folder deleted into a full recycle bin on another file system leaves no partial folder there', async () => {
    mkdirSync(join(root, 'old'));
    writeFileSync(join(root, 'old', 'a.bin'), big.subarray(0, 600 * 1024));
    writeFileSync(join(root, 'old', 'b.bin'), big.subarray(0, 600 * 1024));
    const r = await post('/api/fs/remove', { dir: '/xdev', names: ['old'] });
    expect(r.code).toBe(500);
    expect(readdirSync(join(small, 'bin'))).toEqual([]);
    expect(readdirSync(join(root, 'old')).sort()).toEqual(['a.bin', 'b.bin']);
  });
});

describe('watcher', () => {
  interface Hits { total: number; content: Array<{ parent: string; name: string }> }
  const search = (keywords: string) =>
    ts.api<Hits>('/api/fs/search', { token: admin, body: { parent: '/', keywords, scope: 0, page: 1, per_page: 100, password: '' } });
  /** Write `file` (again and again) until search finds `keywords`, or give up after `ms`. */
  async function dropUntilFound(file: string, keywords: string, ms: number): Promise<number> {
    const end = Date.now() + ms;
    for (;;) {
      writeFileSync(file, String(Date.now()));
      const r = await search(keywords);
      if (r.data?.total === 1 || Date.now() > end) return r.data?.total ?? -1;
      await new Promise((r) => setTimeout(r, 300));
    }
  }

  it('a folder removed and made again on disk is watched again', async () => {
    ok(await post('/api/admin/setting/save', [{ key: 'search_index', value: 'database' }]));
    ok(await post('/api/admin/index/build', {}));
    ok(await putFile(ts, admin, '/again/keep.txt', 'k'));
    const dir = join(ts.dataDir, 'storage', 'again');
    expect(await dropUntilFound(join(dir, 'zebra one.txt'), 'zebra one', 15_000)).toBe(1); // the folder is watched
    rmSync(dir, { recursive: true });
    mkdirSync(dir);
    expect(await dropUntilFound(join(dir, 'zebra two.txt'), 'zebra two', 8_000)).toBe(1);
  });
});
