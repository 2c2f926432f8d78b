/**
 * Local thumbnails of hostile files: pictures and videos that declare huge dimensions in a few
 * hundred KB (decompression bombs). ffmpeg allocates a whole frame before decoding it, so anyone who
 * may upload had anyone who opens the folder make the server take GBs. They get a clear error at
 * once; a large real photo still gets its thumbnail.
 *
 * The bombs are made by hand: a PNG whose pixels are all zero is a zlib stream of zeros, written as
 * one deflated piece repeated (each piece ends on a sync flush, so pieces join), then the Adler-32 of
 * that many zeros. The tools' peak memory is read from /proc while they run (the server runs in this
 * process, so they are its children).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { constants, crc32, deflateRawSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { list, ok, startRestServer } from './fs-helpers.js';
import { ffmpeg, pngSize, thumbTools, type ThumbTool } from './picture-helpers.js';
import { createStorage } from './remote-servers.js';
import { until } from './tasks-helpers.js';

let ts: TestServer;
let admin: string;
let root: string;

function pngChunk(type: string, data: Buffer): Buffer {
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([head, body, crc]);
}

/** A zlib stream of `n` zero bytes, about n/1000 long, without ever holding n bytes. */
function zlibZeros(n: number): Buffer {
  const piece = 1 << 24;
  const sync = (len: number) => deflateRawSync(Buffer.alloc(len), { level: 9, finishFlush: constants.Z_SYNC_FLUSH });
  const whole = sync(piece);
  const parts = [Buffer.from([0x78, 0xda])];
  for (let left = n; left > 0; left -= piece) parts.push(left >= piece ? whole : sync(left));
  // An empty final block (fixed Huffman), then Adler-32: s1 stays 1, s2 adds 1 per byte.
  const adler = Buffer.alloc(4);
  adler.writeUInt32BE(((n % 65521) * 65536 + 1) >>> 0);
  return Buffer.concat([...parts, Buffer.from([0x03, 0x00]), adler]);
}

/**
 * An all-zero `w`×`h` PNG: 8-bit gray (colour type 0, one byte a pixel) or 16-bit RGBA (colour type
 * 6, eight bytes a pixel), plus one filter byte a row.
 */
function zeroPng(w: number, h: number, kind: 'gray8' | 'rgba64'): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = kind === 'gray8' ? 8 : 16;
  ihdr[9] = kind === 'gray8' ? 0 : 6;
  const row = 1 + w * (kind === 'gray8' ? 1 : 8);
  return Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), pngChunk('IHDR', ihdr), pngChunk('IDAT', zlibZeros(h * row)), pngChunk('IEND', Buffer.alloc(0))]);
}

interface Answer {
  status: number;
  type: string | null;
  body: Buffer;
  /** The tools' highest VmHWM seen while the answer was made, KiB. */
  peak: number;
}

async function thumbUrl(mount: string, name: string): Promise<string> {
  const r = await list(ts, admin, mount);
  ok(r);
  return (r.data!.content as unknown as Array<{ name: string; thumb: string }>).find((e) => e.name === name)!.thumb;
}

/** Fetch `url`, sampling the tools running until it answers. */
async function sampled(url: string, sample: (now: ThumbTool[]) => void): Promise<Omit<Answer, 'peak'>> {
  let done: Omit<Answer, 'peak'> | undefined;
  let failed: { error: unknown } | undefined;
  fetch(url).then(async (res) => (done = { status: res.status, type: res.headers.get('content-type'), body: Buffer.from(await res.arrayBuffer()) }))
    .catch((error: unknown) => (failed = { error }));
  return until(`the answer of ${url}`, async () => {
    sample(thumbTools());
    if (failed) throw failed.error;
    return done;
  }, 90_000, 10);
}

/** The thumbnail of `name` in the listing of `mount`, with the tools' peak memory while it was made. */
async function thumb(mount: string, name: string): Promise<Answer> {
  let peak = 0;
  const a = await sampled(await thumbUrl(mount, name), (now) => {
    for (const t of now) peak = Math.max(peak, t.peak);
  });
  return { ...a, peak };
}

function expectTooLarge(a: Answer, name: string): void {
  expect(a.type, `${a.status} ${a.type} ${a.body.length} bytes`).toMatch(/^application\/json/);
  const env = JSON.parse(a.body.toString()) as { code: number; message: string };
  expect(env.code).toBe(400);
  expect(env.message).toMatch(new RegExp(`^cannot make a thumbnail of ${name.replace('.', '\\.')}: picture too large`));
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'treegate-thumb-bombs-'));
  // 16000×16000 (256 megapixels, ffmpeg's own bound is about 268): 250 KB, a 256 MB frame decoded.
  await writeFile(join(root, 'bomb.png'), zeroPng(16000, 16000, 'gray8'));
  // The same picture as the one frame of a video (copied, never decoded here).
  ffmpeg('-i', join(root, 'bomb.png'), '-c', 'copy', join(root, 'bomb.mkv'));
  // A video of PNG frames whose first is 160×90, what its header and ffprobe say, and whose second
  // is 16000×16000 at 16-bit RGBA: a 2 GB frame, where video_thumb_pos 90% takes the thumbnail.
  const frames = await mkdtemp(join(tmpdir(), 'treegate-thumb-bombs-frames-'));
  await writeFile(join(frames, 'f1.png'), zeroPng(160, 90, 'rgba64'));
  await writeFile(join(frames, 'f2.png'), zeroPng(16000, 16000, 'rgba64'));
  ffmpeg('-framerate', '1', '-i', join(frames, 'f%d.png'), '-c', 'copy', join(root, 'grows.mkv'));
  await rm(frames, { recursive: true });
  // JPEG 2000 at 1920×1080 takes ffmpeg a good part of a second: every run is seen by a poll.
  ffmpeg('-f', 'lavfi', '-i', 'testsrc=size=1920x1080:duration=2:rate=1', '-c:v', 'jpeg2000', join(root, 'slow.mkv'));
  ffmpeg('-f', 'lavfi', '-i', 'testsrc=size=8000x6000', '-frames:v', '1', join(root, 'photo.jpg'));
  ts = await startRestServer();
  admin = await ts.login();
  ok(await createStorage(ts, admin, '/pics', 'Local', { root_folder_path: root, thumbnail: true, video_thumb_pos: '90%' }));
}, 120_000);

afterAll(async () => {
  await ts?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

describe('Local thumbnails of decompression bombs', () => {
  // Before the fix: bomb.png got a 144×144 PNG after ffmpeg took over 300 MB for seconds; bomb.mkv
  // a PNG too; grows.mkv had ffmpeg hold 2 GB until the 30 s run timeout ("thumbnail timed out").
  it.each([
    ['a 250 KB PNG declaring 16000×16000 gets "picture too large", its frame never allocated', 'bomb.png'],
    ['a video whose frames are 16000×16000 gets "picture too large" too', 'bomb.mkv'],
    ['a video whose frame grows to 16000×16000 past its header\'s dimensions gets "picture too large", not 2 GB taken', 'grows.mkv'],
  ])('%s', async (_title, name) => {
    const a = await thumb('/pics', name);
    expectTooLarge(a, name);
    expect(a.peak).toBeLessThan(128 * 1024);
  });

  it('an 8000×6000 photo (48 megapixels) still gets its thumbnail', async () => {
    const a = await thumb('/pics', 'photo.jpg');
    expect(a.status).toBe(200);
    expect(a.type).toBe('image/png');
    expect(pngSize(a.body)).toEqual({ width: 144, height: 108 });
  });

  it('thumb_concurrency 0: four requests at once for one file share one ffprobe and one ffmpeg, and all get the PNG', async () => {
    const url = await thumbUrl('/pics', 'slow.mkv');
    const file = join(root, 'slow.mkv');
    const seen = new Set<number>();
    const answers = await Promise.all([0, 1, 2, 3].map(() => sampled(url, (now) => {
      for (const t of now) if (t.file === file) seen.add(t.pid);
    })));
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.type).toBe('image/png');
      expect(pngSize(a.body)).toEqual({ width: 144, height: 81 });
    }
    // Before: each request ran its own ffprobe and ffmpeg, eight runs on one file.
    expect(seen.size).toBeGreaterThan(0);
    expect(seen.size).toBeLessThanOrEqual(2);
  });

  it('a request leaving a shared run does not stop it for the one still waiting', async () => {
    const url = await thumbUrl('/pics', 'slow.mkv');
    const file = join(root, 'slow.mkv');
    const leaving = new AbortController();
    const left = fetch(url, { signal: leaving.signal }).then(() => 'answered', () => 'left');
    const seen = new Set<number>();
    const staying = sampled(url, (now) => {
      for (const t of now) if (t.file === file) seen.add(t.pid);
    });
    await until('a tool on the file', async () => (seen.size > 0 ? true : undefined), 60_000, 10);
    leaving.abort();
    expect(await left).toBe('left');
    const a = await staying;
    expect(a.status).toBe(200);
    expect(pngSize(a.body)).toEqual({ width: 144, height: 81 });
    expect(seen.size).toBeLessThanOrEqual(2);
  });
});
