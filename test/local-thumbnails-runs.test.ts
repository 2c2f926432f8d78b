/**
 * Local thumbnails' ffmpeg/ffprobe runs, watched as processes: thumb_concurrency bounds how many run
 * at once for one storage, and a client that goes away gets its running tool killed, or leaves the
 * queue without one ever starting, without leaking the slot or leaving a file in the cache folder;
 * and the tools do not follow a playlist in an uploaded file to another host file.
 *
 * The server runs in this process (harness.ts), so its tools are this process's children: they are
 * found in /proc by parent pid, and told apart by the file they read as their fd 3 (thumbs.ts).
 * The videos are JPEG 2000 frames at 1920×1080, which ffmpeg takes a good part of a second to probe
 * and to decode: long enough for every run to be seen by a poll, without timing anything.
 */
import { createHash } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { get as httpGet } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { list, ok, startRestServer } from './fs-helpers.js';
import { ffmpeg, pngSize, thumbTools, type ThumbTool } from './picture-helpers.js';
import { createStorage } from './remote-servers.js';
import { until } from './tasks-helpers.js';

let ts: TestServer;
let admin: string;
let root: string;
let cache: string;
let outside: string;
/** Tools this file stopped (SIGSTOP): killed in afterAll if the server left them, so none outlives the test. */
const stopped: number[] = [];

const VIDEOS = ['v1.mkv', 'v2.mkv', 'v3.mkv', 'v4.mkv', 'v5.mkv', 'v6.mkv'];

/** Is `pid` still this process's child (running, stopped or a zombie). */
function alive(pid: number): boolean {
  return thumbTools().some((r) => r.pid === pid);
}

interface Answer {
  status: number;
  type: string | undefined;
  body: Buffer;
}

/** GET `url` on a connection of its own; abort() closes it, as a browser leaving the folder does. */
function request(url: string): { answer: Promise<Answer>; abort(): void } {
  let abort!: () => void;
  const answer = new Promise<Answer>((resolve, reject) => {
    const req = httpGet(url, { agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'], body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    abort = () => req.destroy();
  });
  return { answer, abort };
}

/** Wait for an answer while sampling the tools running at every poll. */
async function sampling<T>(what: string, answers: Promise<T>, sample: (r: ThumbTool[]) => void): Promise<T> {
  let result: { value: T } | undefined;
  let failure: { error: unknown } | undefined;
  answers.then((value) => (result = { value }), (error: unknown) => (failure = { error }));
  await until(what, async () => {
    sample(thumbTools());
    if (failure) throw failure.error;
    return result;
  }, 90_000, 10);
  return result!.value;
}

async function thumbUrls(mount: string): Promise<Record<string, string>> {
  const r = await list(ts, admin, mount);
  ok(r);
  return Object.fromEntries((r.data!.content as unknown as Array<{ name: string; thumb: string }>).map((e) => [e.name, e.thumb]));
}

function expectThumb(a: Answer): void {
  expect(a.status).toBe(200);
  expect(a.type).toBe('image/png');
  expect(pngSize(a.body)).toEqual({ width: 144, height: 81 });
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'treegate-thumb-runs-'));
  cache = await mkdtemp(join(tmpdir(), 'treegate-thumb-runs-cache-'));
  ffmpeg('-f', 'lavfi', '-i', 'testsrc=size=1920x1080:duration=2:rate=1', '-c:v', 'jpeg2000', join(root, VIDEOS[0]!));
  // Copies: each its own host path, so its own runs and its own cache file.
  for (const v of VIDEOS.slice(1)) await copyFile(join(root, VIDEOS[0]!), join(root, v));
  // An HLS playlist named as a picture, naming a video outside the storage (and outside its root).
  outside = await mkdtemp(join(tmpdir(), 'treegate-thumb-runs-outside-'));
  ffmpeg('-f', 'lavfi', '-i', 'testsrc=size=320x240:duration=2', '-pix_fmt', 'yuv420p', join(outside, 'secret.mp4'));
  await mkdir(join(root, 'odd'));
  await writeFile(join(root, 'odd', 'playlist.png'), `#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nfile:${join(outside, 'secret.mp4')}\n#EXT-X-ENDLIST\n`);
  ts = await startRestServer();
  admin = await ts.login();
  for (const [mount, extra] of [
    // No cache folder: every request runs the tools.
    ['/two', { thumb_concurrency: '2' }],
    ['/one', { thumb_concurrency: '1', thumb_cache_folder: cache }],
  ] as const) {
    ok(await createStorage(ts, admin, mount, 'Local', { root_folder_path: root, thumbnail: true, video_thumb_pos: '90%', ...extra }));
  }
});

afterAll(async () => {
  for (const pid of stopped) {
    if (alive(pid)) process.kill(pid, 'SIGKILL');
  }
  await ts?.close();
  await rm(root, { recursive: true, force: true });
  await rm(cache, { recursive: true, force: true });
  if (outside) await rm(outside, { recursive: true, force: true });
});

describe('Local thumbnail runs', () => {
  it('thumb_concurrency 2: never more than 2 ffmpeg/ffprobe at once for the storage, and every request gets its PNG', async () => {
    const urls = await thumbUrls('/two');
    const requests = VIDEOS.map((v) => request(urls[v]!));
    let most = 0;
    const seen = new Set<number>();
    const answers = await sampling('every thumbnail answered', Promise.all(requests.map((r) => r.answer)), (now) => {
      most = Math.max(most, now.length);
      for (const r of now) seen.add(r.pid);
    });
    for (const a of answers) expectThumb(a);
    expect(most).toBe(2);
    // Runs were seen one after another, not just the first two: the bound held throughout.
    expect(seen.size).toBeGreaterThan(2);
    expect(thumbTools()).toEqual([]);
  });

  it('a client going away kills its running ffmpeg, a queued one never starts any, the slot is not leaked, the cache gets no file', async () => {
    const urls = await thumbUrls('/one');
    const [a, b, c] = VIDEOS.map((v) => join(root, v));
    const files = new Set<string>();
    const note = (now: ThumbTool[]) => {
      for (const r of now) files.add(r.file);
    };
    const first = request(urls['v1.mkv']!);
    // The first request holds the only slot once its ffprobe runs: the next two wait in the queue.
    await until('ffprobe of the first video', async () => {
      const now = thumbTools();
      note(now);
      return now.some((r) => r.file === a) ? true : undefined;
    }, 60_000, 10);
    const leaving = request(urls['v2.mkv']!);
    const staying = request(urls['v3.mkv']!);
    // Its ffmpeg, stopped: it cannot finish by itself, so only a kill ends it.
    const held = await until('ffmpeg of the first video, stopped', async () => {
      const now = thumbTools();
      note(now);
      const r = now.find((x) => x.tool === 'ffmpeg' && x.file === a);
      if (!r) return undefined;
      try {
        process.kill(r.pid, 'SIGSTOP');
      } catch {
        return undefined; // exited just now
      }
      stopped.push(r.pid);
      return r.pid;
    }, 60_000, 10);
    const firstAnswer = first.answer.catch((e: unknown) => e);
    const leavingAnswer = leaving.answer.catch((e: unknown) => e);
    first.abort();
    leaving.abort();
    expect(await firstAnswer).toBeInstanceOf(Error);
    expect(await leavingAnswer).toBeInstanceOf(Error);
    // Killed (and reaped: no zombie), well before its 30 s run timeout would.
    await until('the stopped ffmpeg to be gone', async () => {
      note(thumbTools());
      return alive(held) ? undefined : true;
    }, 15_000, 10);
    // The third request gets the slot and its thumbnail; the one that left never ran a tool.
    expectThumb(await sampling('the queued request answered', staying.answer, note));
    expect([...files].filter((f) => f !== '').sort()).toEqual([a, c].sort());
    // The slot is free again: the video of the request that left gets its thumbnail now.
    expectThumb(await sampling('a later request answered', request(urls['v2.mkv']!).answer, note));
    expect(files.has(b!)).toBe(true);
    expect(thumbTools()).toEqual([]);
    // Exactly the two thumbnails made whole: nothing of the killed run, no temp file left.
    const md5 = (s: string) => createHash('md5').update(s).digest('hex');
    expect((await readdir(cache)).sort()).toEqual([b!, c!].map((f) => `alist_thumb_${md5(f)}.png`).sort());
  });

  it('a playlist passed off as a picture gets no thumbnail of the host file it names', async () => {
    const url = (await thumbUrls('/two/odd'))['playlist.png']!;
    const a = await request(url).answer;
    // Before: a 144×108 PNG of secret.mp4, a video outside the storage the reader was never given.
    expect(a.type).toMatch(/^application\/json/);
    const env = JSON.parse(a.body.toString()) as { code: number; message: string };
    expect(env.code).toBe(400);
    expect(env.message).toMatch(/^cannot make a thumbnail of playlist\.png: /);
    expect(thumbTools()).toEqual([]);
  });
});
