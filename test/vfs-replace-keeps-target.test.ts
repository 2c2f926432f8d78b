/**
 * A copy or move that replaces a file loses nothing when it fails: the file in the way is set aside
 * and put back (src/vfs/set-aside.ts), and a Local copy that runs out of space leaves no partial file
 * under its name. Before, the target was removed first, and a copy that then hit a full disk left
 * the old file gone (and, with the driver's own copy, a truncated one in its place). Runs on a
 * 1 MiB tmpfs (root, as disk-full.test.ts).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { smallDisk, type SmallDisk } from './small-disk.js';

let s: TestServer;
let sd: SmallDisk | undefined;
let disk: string;
let token: string;
const big = randomBytes(600 * 1024); // fits once on the 1 MiB disk, not twice
const kept = Buffer.from('the file a failed copy must leave as it was\n');
const basic = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

beforeAll(async () => {
  sd = await smallDisk('1m', 'tg-replace-');
  disk = sd.disk;
  s = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  token = await s.login();
  const r = await s.api('/api/admin/storage/create', { token, body: { mount_path: '/full', driver: 'Local', addition: JSON.stringify({ root_folder_path: disk }) } });
  expect(r, JSON.stringify(r)).toMatchObject({ code: 200 });
});

afterAll(async () => {
  await s?.close();
  await sd?.remove();
});

beforeEach(async () => {
  for (const n of await readdir(disk)) await rm(join(disk, n), { recursive: true, force: true });
  await mkdir(join(disk, 'a'));
  await mkdir(join(disk, 'b'));
  await writeFile(join(disk, 'a', 'big.bin'), big);
  await writeFile(join(disk, 'b', 'big.bin'), kept);
  await writeFile(join(disk, 'b', 'other.bin'), kept);
});

/** Folder b holds exactly its two files, with their bytes: no temp, partial or set-aside file. */
async function expectBUntouched(): Promise<void> {
  expect((await readdir(join(disk, 'b'))).sort()).toEqual(['big.bin', 'other.bin']);
  expect((await readFile(join(disk, 'b', 'big.bin'))).equals(kept)).toBe(true);
  expect((await readFile(join(disk, 'b', 'other.bin'))).equals(kept)).toBe(true);
}

const dav = (method: string, path: string, dst: string) =>
  fetch(`${s.url}/dav/full${path}`, { method, headers: { authorization: basic, Destination: `${s.url}/dav/full${dst}`, Overwrite: 'T' } });

describe('a copy over a file that runs out of space', () => {
  it('REST copy with overwrite (the storage\'s own copy): no space, and the old file is still there', async () => {
    const r = await s.api('/api/fs/copy', { token, body: { src_dir: '/full/a', dst_dir: '/full/b', names: ['big.bin'], overwrite: true } });
    expect(r).toMatchObject({ code: 500, message: 'no space left on the storage' });
    await expectBUntouched();
  });

  it('WebDAV COPY over the same name: 507, and the old file is still there', async () => {
    const res = await dav('COPY', '/a/big.bin', '/b/big.bin');
    await res.arrayBuffer();
    expect(res.status).toBe(507);
    await expectBUntouched();
  });

  it('WebDAV COPY over another name (streamed): 507, and the old file is still there', async () => {
    const res = await dav('COPY', '/a/big.bin', '/b/other.bin');
    await res.arrayBuffer();
    expect(res.status).toBe(507);
    await expectBUntouched();
  });
});

describe('a copy or move over a file that succeeds', () => {
  it('replaces it and leaves nothing else behind', async () => {
    await rm(join(disk, 'a', 'big.bin'));
    await writeFile(join(disk, 'a', 'new.bin'), 'new bytes');
    await writeFile(join(disk, 'a', 'moved.bin'), 'moved bytes');
    const c = await dav('COPY', '/a/new.bin', '/b/big.bin');
    expect(c.status).toBe(204);
    const r = await s.api('/api/fs/move', { token, body: { src_dir: '/full/a', dst_dir: '/full/b', names: ['moved.bin'], overwrite: true } });
    expect(r).toMatchObject({ code: 200 });
    const m = await dav('MOVE', '/b/moved.bin', '/b/other.bin'); // a rename over a file
    expect(m.status).toBe(204);
    expect((await readdir(join(disk, 'b'))).sort()).toEqual(['big.bin', 'other.bin']);
    expect(await readFile(join(disk, 'b', 'big.bin'), 'utf8')).toBe('new bytes');
    expect(await readFile(join(disk, 'b', 'other.bin'), 'utf8')).toBe('moved bytes');
    expect(await readdir(join(disk, 'a'))).toEqual(['new.bin']);
  });
});
