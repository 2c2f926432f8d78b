/**
 * Local's `thumbnail` options (alist-compat "thumb (Local)"): AList's thumb URLs in listings, PNGs
 * 144 px wide made by ffmpeg for images and videos, the thumb cache folder, AList's Link (which
 * makes thumbnails whatever the option says), path passwords, failures, and a server without ffmpeg.
 * The pictures and videos are made by ffmpeg itself at the start.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { addMeta, expectCode, list, makeUser, ok, startRestServer } from './fs-helpers.js';
import { ffmpeg, pngSize } from './picture-helpers.js';
import { createStorage } from './remote-servers.js';

let ts: TestServer;
let admin: string;
let root: string;
let cache: string;

const md5 = (s: string) => createHash('md5').update(s).digest('hex');

/**
 * `jpeg` with an EXIF APP1 segment right after its SOI saying Orientation `o` (6: turn 90° clockwise
 * to show it), as cameras write it.
 */
function withOrientation(jpeg: Buffer, o: number): Buffer {
  // TIFF header (little-endian), IFD0 with one entry: tag 0x0112 Orientation, SHORT, count 1, value o.
  const tiff = Buffer.from([0x49, 0x49, 0x2a, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, o, 0, 0, 0, 0, 0, 0, 0]);
  const payload = Buffer.concat([Buffer.from('Exif\0\0', 'latin1'), tiff]);
  const head = Buffer.from([0xff, 0xe1, 0, 0]);
  head.writeUInt16BE(payload.length + 2, 2);
  return Buffer.concat([jpeg.subarray(0, 2), head, payload, jpeg.subarray(2)]);
}

/** The average gray level (0-255) of a picture, as ffmpeg decodes it. */
function grayLevel(file: string): number {
  const raw = execFileSync('ffmpeg', ['-v', 'error', '-i', file, '-f', 'rawvideo', '-pix_fmt', 'gray', 'pipe:1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  return raw.reduce((a, b) => a + b, 0) / raw.length;
}

async function get(url: string): Promise<{ type: string | null; body: Buffer }> {
  const res = await fetch(url.startsWith('http') ? url : ts.url + url);
  expect(res.status).toBe(200);
  return { type: res.headers.get('content-type'), body: Buffer.from(await res.arrayBuffer()) };
}

async function envelope(url: string): Promise<{ code: number; message: string }> {
  const { type, body } = await get(url);
  expect(type, body.subarray(0, 200).toString()).toMatch(/^application\/json/);
  return JSON.parse(body.toString()) as { code: number; message: string };
}

type Listed = { name: string; sign: string; thumb: string };

async function entries(path: string, token = admin, password?: string): Promise<Record<string, Listed>> {
  const r = await list(ts, token, path, password === undefined ? {} : { password });
  ok(r);
  return Object.fromEntries((r.data!.content as unknown as Listed[]).map((e) => [e.name, e]));
}

async function local(mount: string, extra: Record<string, unknown>): Promise<void> {
  ok(await createStorage(ts, admin, mount, 'Local', { root_folder_path: root, ...extra }));
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'treegate-thumbs-'));
  cache = await mkdtemp(join(tmpdir(), 'treegate-thumb-cache-'));
  const at = (n: string) => join(root, n);
  ffmpeg('-f', 'lavfi', '-i', 'testsrc=size=640x480', '-frames:v', '1', at('photo.jpg'));
  for (const n of ['swap.jpg', 'kept.jpg']) ffmpeg('-f', 'lavfi', '-i', 'testsrc=size=640x480', '-frames:v', '1', at(n));
  ffmpeg('-f', 'lavfi', '-i', 'testsrc=size=400x100', '-frames:v', '1', at('wide.png'));
  ffmpeg('-f', 'lavfi', '-i', 'testsrc=size=320x240:duration=2', '-pix_fmt', 'yuv420p', at('clip.mp4'));
  // Black for 2 s, then white for 2 s, a key frame every 5 frames: which half a thumbnail shows
  // tells where in the video it was taken.
  ffmpeg('-f', 'lavfi', '-i', 'color=black:size=160x120:duration=2:rate=25', '-f', 'lavfi', '-i', 'color=white:size=160x120:duration=2:rate=25',
    '-filter_complex', '[0:v][1:v]concat=n=2:v=1', '-g', '5', '-pix_fmt', 'yuv420p', at('halves.mp4'));
  await writeFile(at('turned.jpg'), withOrientation(await readFile(at('photo.jpg')), 6));
  await writeFile(at('notes.txt'), 'not a picture\n');
  await writeFile(at('bad.jpg'), Buffer.concat([Buffer.from('ffd8ffe0', 'hex'), Buffer.alloc(2000, 0x5a)]));
  await writeFile(at('pic.svg'), '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>');
  await mkdir(at('locked'));
  await writeFile(at('locked/inner.png'), await readFile(at('wide.png')));
  ts = await startRestServer();
  admin = await ts.login();
  await local('/th', { thumbnail: true, thumb_cache_folder: cache });
  await local('/plain', { thumbnail: false });
});

afterAll(async () => {
  await ts?.close();
  await rm(root, { recursive: true, force: true });
  await rm(cache, { recursive: true, force: true });
});

describe('Local thumbnails', () => {
  it('fs/list and fs/get give images and videos AList\'s signed thumb URL, other entries ""', async () => {
    const e = await entries('/th');
    for (const name of ['photo.jpg', 'wide.png', 'clip.mp4', 'bad.jpg', 'pic.svg']) {
      expect(e[name]!.sign).not.toBe('');
      expect(e[name]!.thumb).toBe(`${ts.url}/d/th/${name}?type=thumb&sign=${encodeURIComponent(e[name]!.sign)}`);
    }
    expect(e['notes.txt']!.thumb).toBe('');
    expect(e.locked!.thumb).toBe('');
    const got = await ts.api<Listed>('/api/fs/get', { token: admin, body: { path: '/th/photo.jpg' } });
    ok(got);
    expect(got.data!.thumb).toBe(e['photo.jpg']!.thumb);
  });

  it('the thumb URL answers a PNG 144 px wide that keeps the picture\'s aspect ratio', async () => {
    const e = await entries('/th');
    const photo = await get(e['photo.jpg']!.thumb);
    expect(photo.type).toBe('image/png');
    expect(pngSize(photo.body)).toEqual({ width: 144, height: 108 });
    expect(pngSize((await get(e['wide.png']!.thumb)).body)).toEqual({ width: 144, height: 36 });
    // EXIF Orientation 6: the 640×480 picture is shown upright as 480×640.
    expect(pngSize((await get(e['turned.jpg']!.thumb)).body)).toEqual({ width: 144, height: 192 });
  });

  it('a video\'s thumbnail is a PNG of one frame, taken at video_thumb_pos', async () => {
    const e = await entries('/th');
    const clip = await get(e['clip.mp4']!.thumb);
    expect(clip.type).toBe('image/png');
    expect(pngSize(clip.body)).toEqual({ width: 144, height: 108 });
    await local('/late', { thumbnail: true, video_thumb_pos: '75%' });
    await local('/early', { thumbnail: true, video_thumb_pos: '0.5' });
    const dir = await mkdtemp(join(tmpdir(), 'treegate-thumb-frames-'));
    try {
      for (const [mount, want] of [['/late', 'white'], ['/early', 'black']] as const) {
        const png = (await get((await entries(mount))['halves.mp4']!.thumb)).body;
        await writeFile(join(dir, 'f.png'), png);
        const level = grayLevel(join(dir, 'f.png'));
        if (want === 'white') expect(level).toBeGreaterThan(200);
        else expect(level).toBeLessThan(50);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('with thumb_cache_folder the thumbnail is kept as alist_thumb_<md5 of the host path>.png and served from there', async () => {
    const e = await entries('/th');
    const served = (await get(e['kept.jpg']!.thumb)).body;
    const kept = join(cache, `alist_thumb_${md5(join(root, 'kept.jpg'))}.png`);
    expect(await readFile(kept)).toEqual(served);
    // Whatever is in the cache file is the answer from now on: no new thumbnail is made.
    const other = await readFile(join(root, 'wide.png'));
    await writeFile(kept, other);
    expect((await get(e['kept.jpg']!.thumb)).body).toEqual(other);
    expect((await readdir(cache)).filter((n) => !n.startsWith('alist_thumb_'))).toEqual([]);
  });

  it('a file changed since its thumbnail was kept gets a new one', async () => {
    const e = await entries('/th');
    expect(pngSize((await get(e['swap.jpg']!.thumb)).body)).toEqual({ width: 144, height: 108 });
    ffmpeg('-f', 'lavfi', '-i', 'testsrc=size=200x400', '-frames:v', '1', join(root, 'swap.jpg'));
    expect(pngSize((await get(e['swap.jpg']!.thumb)).body)).toEqual({ width: 144, height: 288 });
  });

  it('thumbnail off: no thumb URLs, and ?type=thumb answers the file itself (no ffmpeg run the admin did not turn on)', async () => {
    const e = await entries('/plain');
    expect(Object.values(e).map((x) => x.thumb)).toEqual(Object.values(e).map(() => ''));
    const sign = encodeURIComponent(e['photo.jpg']!.sign);
    const original = await readFile(join(root, 'photo.jpg'));
    expect((await get(`/d/plain/photo.jpg?type=thumb&sign=${sign}`)).body).toEqual(original);
    expect((await get(`/d/plain/photo.jpg?sign=${sign}`)).body).toEqual(original);
  });

  it('an svg stands for its own thumbnail (AList)', async () => {
    const { body } = await get((await entries('/th'))['pic.svg']!.thumb);
    expect(body.toString()).toBe(await readFile(join(root, 'pic.svg'), 'utf8'));
  });

  it('a path password protects the thumbnail as it protects the file', async () => {
    ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'sign_all', value: 'false' }] }));
    try {
      await addMeta(ts, admin, { path: '/th/locked', password: 'pw', p_sub: true });
      // Signs are off: an open folder's thumbnail needs none, a protected one's does.
      expect(pngSize((await get('/d/th/photo.jpg?type=thumb')).body).width).toBe(144);
      expectCode(await envelope('/d/th/locked/inner.png?type=thumb'), 401, 'expire missing');
      expectCode(await envelope('/d/th/locked/inner.png?type=thumb&sign=forged:0'), 401, 'sign invalid');
      const u = await makeUser(ts, admin, 'thumbuser', 0);
      expect((await list(ts, u, '/th/locked')).code).toBe(403);
      const inner = (await entries('/th/locked', u, 'pw'))['inner.png']!;
      expect(inner.thumb).toContain('&sign=' + encodeURIComponent(inner.sign));
      expect(inner.sign).not.toBe('');
      expect(pngSize((await get(inner.thumb)).body)).toEqual({ width: 144, height: 36 });
    } finally {
      ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'sign_all', value: 'true' }] }));
    }
  });

  it('a file that is neither an image nor a video answers a clear error', async () => {
    const sign = encodeURIComponent((await entries('/th'))['notes.txt']!.sign);
    expectCode(await envelope(`/d/th/notes.txt?type=thumb&sign=${sign}`), 400,
      'no thumbnail of notes.txt: it is neither an image nor a video (image_types, video_types settings)');
  });

  it('a corrupt picture answers a clear error and leaves nothing in the cache folder', async () => {
    const r = await envelope((await entries('/th'))['bad.jpg']!.thumb);
    expect(r.code).toBe(400);
    expect(r.message).toMatch(/^cannot make a thumbnail of bad\.jpg: \S/);
    expect(r.message).not.toContain(root);
    expect(await readdir(cache)).not.toContain(`alist_thumb_${md5(join(root, 'bad.jpg'))}.png`);
    expect((await readdir(cache)).filter((n) => !n.startsWith('alist_thumb_'))).toEqual([]);
  });

  it('bad thumb_concurrency or video_thumb_pos values fail the storage\'s init, as in AList', async () => {
    for (const [mount, extra, why] of [
      ['/badconc', { thumb_concurrency: 'many' }, 'thumb_concurrency many is not a whole number'],
      ['/badpos', { video_thumb_pos: '150%' }, 'invalid video_thumb_pos value: 150%'],
    ] as const) {
      const r = await createStorage(ts, admin, mount, 'Local', { root_folder_path: root, thumbnail: true, ...extra });
      expect(r.code).toBe(500);
      expect(r.message).toContain(why);
    }
  });

  it('without ffmpeg: the storage works, warns once at init, offers no thumbnails, and ?type=thumb answers a clear error', async () => {
    const path = process.env.PATH;
    const empty = await mkdtemp(join(tmpdir(), 'treegate-no-ffmpeg-'));
    process.env.PATH = empty; // the driver looks ffmpeg up in PATH, as any program
    try {
      await local('/noff', { thumbnail: true });
    } finally {
      process.env.PATH = path;
      await rm(empty, { recursive: true, force: true });
    }
    const e = await entries('/noff');
    expect(e['photo.jpg']).toBeDefined();
    expect(Object.values(e).every((x) => x.thumb === '')).toBe(true);
    expectCode(await envelope(`/d/noff/photo.jpg?type=thumb&sign=${encodeURIComponent(e['photo.jpg']!.sign)}`), 500,
      'thumbnails need ffmpeg, which is not installed on the server');
    expect(ts.logs.filter((l) => l.includes('thumbnails need ffmpeg'))).toHaveLength(1);
    expect((await get(`/d/noff/photo.jpg?sign=${encodeURIComponent(e['photo.jpg']!.sign)}`)).body).toEqual(await readFile(join(root, 'photo.jpg')));
  });
});
