/**
 * The Local driver's small-upload path (an unnamed O_TMPFILE file linked under its name by
 * native/linkfd), reviewed and proved over the real server.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { tempFolders } from './temp-folders.js';

let ts: TestServer;
let admin: string;
const temp = tempFolders();
let root: string;

const post = <T = unknown>(path: string, body: unknown = {}) => ts.api<T>(path, { token: admin, body });

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  root = temp.make('tg-lp3-');
  ok(await post('/api/admin/storage/create', { mount_path: '/l', driver: 'Local', addition: JSON.stringify({ root_folder_path: root }) }));
});

afterAll(async () => {
  await ts?.close();
  temp.removeAll();
});

/**
 * Folders made under `root` (below `top`) so that `root/top/.../<name>` is `total` bytes long,
 * the name `nameLen` bytes; the virtual path of that file and its real path.
 */
function deepPath(top: string, total: number, nameLen: number): { vpath: string; real: string } {
  mkdirSync(join(root, top));
  const parts = [top];
  let rest = total - root.length - 1 - top.length - 1 - nameLen; // the bytes left for folders (each with its slash)
  for (let i = 0; rest > 0; i++) {
    const len = Math.min(200, rest - 1);
    parts.push(String.fromCharCode(97 + (i % 26)).repeat(len));
    rest -= len + 1;
    mkdirSync(join(root, ...parts));
  }
  parts.push('f'.repeat(nameLen));
  const real = join(root, ...parts);
  if (Buffer.byteLength(real) !== total) throw new Error(`path of ${Buffer.byteLength(real)} bytes, not ${total}`);
  return { vpath: '/l/' + parts.join('/'), real };
}

describe('small uploads to long paths', () => {
  // The name longer than a temp name (46 bytes with its slash), so the named temp file's path fits
  // wherever the target's does: the big upload and, before the unnamed file, the small one worked.
  it('a file whose real path is 4095 bytes (PATH_MAX with its NUL) is stored, new or replaced, as a big one is', async () => {
    const { vpath, real } = deepPath('p4095', 4095, 60);
    ok(await putFile(ts, admin, vpath, 'small'));
    expect(readFileSync(real, 'utf8')).toBe('small');
    ok(await putFile(ts, admin, vpath, Buffer.alloc(100_000, 1)));
    expect(readFileSync(real).length).toBe(100_000);
    ok(await putFile(ts, admin, vpath, 'again'));
    expect(readFileSync(real, 'utf8')).toBe('again');
  });
});
