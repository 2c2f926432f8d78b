/**
 * Two follow-ups, against the real server:
 * - an Alias over a Local storage with `thumbnail` on passes its thumbnails on (AList's alias gives
 *   its target's thumb): listings through the Alias offer the thumb URL on the Alias's own path and
 *   that URL answers the target's PNG; a target without thumbnails offers none through it either;
 * - a copy task whose destination storage the admin disables mid-copy fails naming it, at once
 *   (no retries), landing nothing, as one whose destination is deleted does.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { list, ok, startRestServer } from './fs-helpers.js';
import { ffmpeg, pngSize } from './picture-helpers.js';
import { createStorage, holdingProxy } from './remote-servers.js';
import { addLocalStorage, settle, until } from './tasks-helpers.js';

let ts: TestServer;
let admin: string;
let pics: string;
let more: string;
const roots: string[] = [];

type Listed = { name: string; sign: string; thumb: string };

async function entries(path: string): Promise<Record<string, Listed>> {
  const r = await list(ts, admin, path);
  ok(r);
  return Object.fromEntries((r.data!.content as unknown as Listed[]).map((e) => [e.name, e]));
}

async function get(url: string): Promise<{ type: string | null; body: Buffer }> {
  const res = await fetch(url.startsWith('http') ? url : ts.url + url);
  expect(res.status).toBe(200);
  return { type: res.headers.get('content-type'), body: Buffer.from(await res.arrayBuffer()) };
}

const alias = async (mount: string, paths: string) => ok(await createStorage(ts, admin, mount, 'Alias', { paths }));

beforeAll(async () => {
  pics = await mkdtemp(join(tmpdir(), 'treegate-alias-thumbs-'));
  more = await mkdtemp(join(tmpdir(), 'treegate-alias-thumbs-more-'));
  roots.push(pics, more);
  ffmpeg('-f', 'lavfi', '-i', 'testsrc=size=640x480', '-frames:v', '1', join(pics, 'photo.jpg'));
  await writeFile(join(pics, 'notes.txt'), 'not a picture\n');
  await writeFile(join(more, 'other.txt'), 'other\n');
  ts = await startRestServer();
  admin = await ts.login();
  ok(await createStorage(ts, admin, '/th', 'Local', { root_folder_path: pics, thumbnail: true }));
  ok(await createStorage(ts, admin, '/plain', 'Local', { root_folder_path: pics, thumbnail: false }));
  ok(await createStorage(ts, admin, '/more', 'Local', { root_folder_path: more, thumbnail: true }));
  await alias('/al-th', '/th');
  await alias('/al-plain', '/plain');
  // Two names, one of them merging two targets: the picture is in the second target of `merged`.
  await alias('/al-multi', 'merged:/more\nmerged:/th\nflat:/plain');
});

afterAll(async () => {
  await ts?.close();
  await Promise.all(roots.map((r) => rm(r, { recursive: true, force: true })));
});

describe('thumbnails through an Alias', () => {
  it('a listing through the Alias offers the thumb URL on the Alias\'s path for an image, "" for a text file', async () => {
    const e = await entries('/al-th');
    expect(e['photo.jpg']!.sign).not.toBe('');
    expect(e['photo.jpg']!.thumb).toBe(`${ts.url}/d/al-th/photo.jpg?type=thumb&sign=${encodeURIComponent(e['photo.jpg']!.sign)}`);
    expect(e['notes.txt']!.thumb).toBe('');
  });

  it('the thumb URL answers the target\'s PNG, 144 px wide', async () => {
    const { type, body } = await get((await entries('/al-th'))['photo.jpg']!.thumb);
    expect(type).toBe('image/png');
    expect(pngSize(body)).toEqual({ width: 144, height: 108 });
  });

  it('a multi-target Alias asks the target that holds the file', async () => {
    const e = await entries('/al-multi/merged');
    expect(Object.keys(e).sort()).toEqual(['notes.txt', 'other.txt', 'photo.jpg']);
    expect(e['photo.jpg']!.thumb).toBe(`${ts.url}/d/al-multi/merged/photo.jpg?type=thumb&sign=${encodeURIComponent(e['photo.jpg']!.sign)}`);
    const { type, body } = await get(e['photo.jpg']!.thumb);
    expect(type).toBe('image/png');
    expect(pngSize(body).width).toBe(144);
    expect((await entries('/al-multi/flat'))['photo.jpg']!.thumb).toBe('');
  });

  it('with the target\'s thumbnail option off the Alias offers none, and type=thumb answers the file itself', async () => {
    const e = await entries('/al-plain');
    expect(e['photo.jpg']!.thumb).toBe('');
    const { body } = await get(`/d/al-plain/photo.jpg?type=thumb&sign=${encodeURIComponent(e['photo.jpg']!.sign)}`);
    expect(body.equals(await readFile(join(pics, 'photo.jpg')))).toBe(true);
  });
});

describe('a copy task whose destination storage is disabled while its bytes move', () => {
  it('fails naming the storage at once, without retries; nothing lands', async () => {
    const srcRoot = await addLocalStorage(ts, admin, '/cd-host');
    const dstRoot = await addLocalStorage(ts, admin, '/cd-dst');
    roots.push(srcRoot, dstRoot);
    await writeFile(join(srcRoot, 'big.bin'), randomBytes(1 << 20));
    const proxy = await holdingProxy(ts.url, 64 << 10);
    try {
      ok(await createStorage(ts, admin, '/cd-src', 'WebDav', { address: `http://127.0.0.1:${proxy.port}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/cd-host' }));
      const rows = await ts.api<{ content: Array<{ id: number; mount_path: string }> }>('/api/admin/storage/list', { token: admin });
      const dst = rows.data!.content.find((s) => s.mount_path === '/cd-dst')!;
      const r = await ts.api<{ tasks: Array<{ id: string }> }>('/api/fs/copy', { token: admin, body: { src_dir: '/cd-src', dst_dir: '/cd-dst', names: ['big.bin'] } });
      ok(r);
      const id = r.data!.tasks[0]!.id;
      // The put's temp file is in the destination folder once the first bytes went through.
      await until('the copy to be under way', async () => (proxy.sent() > 0 && (await readdir(dstRoot)).length > 0 ? true : undefined), 30_000, 10);
      ok(await ts.api(`/api/admin/storage/disable?id=${dst.id}`, { token: admin, body: {} }));
      proxy.release();
      const task = (await settle(ts, admin, 'copy')).find((t) => t.id === id);
      expect(task).toMatchObject({ state: 7, error: 'destination storage [/cd-dst] was deleted or changed' });
      expect(ts.running.core.tasks.manager.get(id)!.retry_count).toBe(0);
      expect(await readdir(dstRoot)).toEqual([]);
    } finally {
      await proxy.close();
    }
  }, 60_000);
});
