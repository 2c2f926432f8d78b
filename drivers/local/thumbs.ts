/**
 * Local's thumbnails (AList's `thumbnail`, `thumb_cache_folder`, `thumb_concurrency` and
 * `video_thumb_pos` options; its drivers/local getThumb): a PNG 144 px wide, the height keeping the
 * aspect ratio (Lanczos), of an image or of one video frame at video_thumb_pos. Both are made by
 * ffmpeg (ffprobe for a video's duration); without ffmpeg the storage works and offers none.
 *
 * Orientation: ffmpeg 5.1 (Debian 12's) turns a JPEG's EXIF Orientation into a display matrix and
 * applies it (autorotate, on by default), as it does a video's rotation: checked with orientation 6
 * (a 640×320 picture comes out 144×288) and 2 (mirrored). Other formats' EXIF (WebP, TIFF, PNG eXIf)
 * were not checked, nor older ffmpeg releases.
 *
 * With a cache folder the thumbnail is kept as `alist_thumb_<md5 of the host path>.png`, AList's
 * name, so an AList cache folder is reused. Unlike AList, a cached thumbnail not newer than its file's
 * last change (ctime: a write, or another file renamed over it) is made anew: AList kept showing a
 * replaced picture's old thumbnail for good.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import type { Stats } from 'node:fs';
import { open, rename, rm, stat } from 'node:fs/promises';
import * as nodePath from 'node:path';
import { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { VfsError } from '../../src/errors.js';
import type { Link, ThumbSource } from '../types.js';
import { Slots } from '../util/slots.js';
import { abortError } from '../util/streams.js';
import { tempIn } from './put-file.js';

/** AList's prefix of cached thumbnails' names. */
export const THUMB_PREFIX = 'alist_thumb_';
const WIDTH = 144;
/** A 144 px wide PNG is some tens of KiB: a tool's output past this is refused (a 144 × 10⁵ strip). */
export const MAX_THUMB_BYTES = 4 << 20;
/** One ffmpeg or ffprobe run; far above a thumbnail of a 100-megapixel picture on a slow machine. */
const RUN_TIMEOUT_MS = 30_000;
/**
 * Pictures above this many pixels get no thumbnail. ffmpeg allocates a whole frame before decoding
 * it: a PNG of a few KB that declares 16000×16000 at 16-bit RGBA made ffmpeg take 2 GB for 40 s
 * (ffmpeg itself refuses above about 268 megapixels). 100 megapixels keeps every camera's photo.
 */
export const MAX_PIXELS = 100_000_000;
/**
 * ffprobe's -max_alloc: it only reads dimensions and duration, but for an image it decodes the frame
 * to learn them. Decoders set the dimensions before they allocate the frame, so one larger than this
 * fails fast and the dimensions are still reported (checked with PNG and WebP); containers' indexes
 * of long videos stay far below it.
 */
const PROBE_ALLOC = 64 << 20;
/**
 * ffmpeg's -max_alloc (one allocation; its default is 2 GiB): the bound for pictures ffprobe reports
 * no dimensions of (some TIFFs, a truncated JPEG), and for a video whose frames grow after its first. A 100-megapixel frame
 * of 8-bit RGBA is 400 MB; a larger one is refused (a 16-bit RGBA picture above 67 megapixels).
 */
const MAX_ALLOC = 512 << 20;
/** What ffmpeg says when -max_alloc refused a frame. */
const ALLOC_FAILED = /get_buffer\(\) failed|Cannot allocate memory/;
/** What a failure message quotes of ffmpeg's own words. */
const ERR_TEXT = 300;
/**
 * Demuxers that open other files or addresses named inside their input. An HLS playlist uploaded
 * as `x.png`, naming `file:/any/host/video.mp4`, had ffmpeg make the thumbnail of that host file, a
 * frame of a video outside every storage (DASH likewise). None of them makes a thumbnail of a real
 * file here anyway: names in them are relative to /dev/fd/3. sdp, rtsp and rtp open sockets (the
 * protocol whitelist ffmpeg gives a file input stops them too). ffmpeg takes a whitelist of
 * demuxers but no blacklist: the tools are given every other demuxer ffmpeg lists.
 */
const NESTING_DEMUXERS = new Set(['hls', 'dash', 'concat', 'imf', 'sdp', 'rtsp', 'rtp']);

export interface ThumbSettings {
  /** Absolute cache folder; '' for none. */
  cacheFolder: string;
  /** Thumbnails made at once; 0 for no bound (AList's meaning). */
  concurrency: number;
  /** video_thumb_pos: a share of the duration, or seconds into the video. */
  videoPos: { share: number } | { seconds: number };
}

const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/** The options as AList's Init reads them; INVALID (the storage's init error) on a bad value. */
export function thumbSettings(o: { thumb_cache_folder: string; thumb_concurrency: string; video_thumb_pos: string }): ThumbSettings {
  const conc = o.thumb_concurrency.trim();
  if (conc !== '' && !/^\d+$/.test(conc)) throw new VfsError('INVALID', `thumb_concurrency ${o.thumb_concurrency} is not a whole number`);
  const pos = o.video_thumb_pos.trim() || '20%';
  const num = pos.endsWith('%') ? pos.slice(0, -1) : pos;
  const value = NUMBER.test(num) ? Number(num) : NaN;
  if (!Number.isFinite(value) || value < 0 || (pos.endsWith('%') && value > 100)) {
    throw new VfsError('INVALID', `invalid video_thumb_pos value: ${o.video_thumb_pos} (seconds, or a percentage between 0% and 100%)`);
  }
  return {
    cacheFolder: o.thumb_cache_folder.trim() === '' ? '' : nodePath.resolve(o.thumb_cache_folder),
    concurrency: conc === '' ? 0 : Number(conc),
    videoPos: pos.endsWith('%') ? { share: value / 100 } : { seconds: value },
  };
}

/** The file a thumbnail is asked of: its driver-side name, lexical and real host paths, stats. */
export interface ThumbFile {
  name: string;
  host: string;
  real: string;
  stats: Stats;
}

export class Thumbnailer {
  /** The tools' -format_whitelist; undefined when ffmpeg does not run. */
  private formats: Promise<string | undefined> | undefined;
  private readonly slots: Slots | undefined;
  /** Thumbnails being made, by the file's version (see shared). */
  private readonly making = new Map<string, { png: Promise<Buffer>; waiters: number; stop: AbortController }>();

  constructor(private readonly s: ThumbSettings, private readonly log: Logger) {
    this.slots = s.concurrency > 0 ? new Slots(s.concurrency) : undefined;
  }

  get cacheFolder(): string {
    return this.s.cacheFolder;
  }

  /** Whether ffmpeg runs here; asked once, and a missing one is warned about once. */
  async available(): Promise<boolean> {
    return (await this.whitelist()) !== undefined;
  }

  private whitelist(): Promise<string | undefined> {
    return (this.formats ??= demuxers().then((names) => {
      if (names === undefined) this.log.warn('thumbnails need ffmpeg, which is not installed (Debian: apt-get install ffmpeg): listings offer none and thumbnail requests fail');
      else if (names.length === 0) this.log.warn('thumbnails are off: no demuxer read from `ffmpeg -demuxers` (an output this server does not know)');
      return names?.length ? names.filter((n) => !NESTING_DEMUXERS.has(n)).join(',') : undefined;
    }));
  }

  async link(f: ThumbFile, source: ThumbSource, signal?: AbortSignal): Promise<Link> {
    if (!source) throw new VfsError('INVALID', `no thumbnail of ${f.name}: it is neither an image nor a video (image_types, video_types settings)`);
    const cached = this.s.cacheFolder ? nodePath.join(this.s.cacheFolder, `${THUMB_PREFIX}${createHash('md5').update(f.host).digest('hex')}.png`) : '';
    if (cached) {
      // A cached thumbnail listed in a storage is its own thumbnail (AList), never one of a thumbnail.
      if (f.name.startsWith(THUMB_PREFIX)) return { kind: 'file', path: f.real, size: f.stats.size };
      const st = await stat(cached).catch(() => undefined);
      if (st?.isFile() && st.mtimeMs > f.stats.ctimeMs) return { kind: 'file', path: cached, size: st.size };
    }
    const formats = await this.whitelist();
    if (!formats) throw new VfsError('NOT_SUPPORTED', 'thumbnails need ffmpeg, which is not installed on the server');
    // The name and lexical path too: they name the file in errors and its cache file.
    const png = await this.shared(JSON.stringify([source, f.name, f.host, f.real, f.stats.ctimeMs]), signal, async (stop) => {
      const make = () => this.make(f, source, formats, stop);
      const made = await (this.slots ? this.slots.run(make, stop) : make());
      if (cached) await this.keep(cached, made);
      return made;
    });
    return {
      kind: 'range', size: png.length,
      open: async (r) => Readable.from([png.subarray(r?.start ?? 0, r?.end === undefined ? undefined : r.end + 1)]),
    };
  }

  /**
   * The thumbnail being made of one version of a file (`key`), made once for every request that
   * asks while it is made. A folder's view asks each thumbnail once per viewer: N viewers (or one
   * client asking N times) of a heavy picture ran ffmpeg N times at once, each with its own frame,
   * and with thumb_concurrency 0 nothing bounded that. The run stops when the last waiter leaves.
   */
  private shared(key: string, signal: AbortSignal | undefined, make: (stop: AbortSignal) => Promise<Buffer>): Promise<Buffer> {
    if (signal?.aborted) return Promise.reject(abortError(signal));
    let run = this.making.get(key);
    if (!run) {
      const stop = new AbortController();
      const forget = () => {
        if (this.making.get(key) === run) this.making.delete(key);
      };
      run = { png: make(stop.signal), waiters: 0, stop };
      this.making.set(key, run);
      run.png.then(forget, forget);
    }
    const joined = run;
    joined.waiters++;
    return new Promise<Buffer>((resolve, reject) => {
      const onAbort = () => {
        if (--joined.waiters === 0) {
          // Gone from the map first: a request arriving now starts a run of its own, not this dying one.
          if (this.making.get(key) === joined) this.making.delete(key);
          joined.stop.abort(signal?.reason);
        }
        reject(abortError(signal));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      joined.png.then((png) => {
        signal?.removeEventListener('abort', onAbort);
        resolve(png);
      }, (e: unknown) => {
        signal?.removeEventListener('abort', onAbort);
        reject(e);
      });
    });
  }

  private async make(f: ThumbFile, source: 'image' | 'video', formats: string, signal?: AbortSignal): Promise<Buffer> {
    // The tools read the file we opened, as their /dev/fd/3: no file name reaches them. ffmpeg's
    // image reader takes a `%d` in a name for a numbered sequence (and then read a sibling file).
    const fh = await open(f.real, 'r');
    const only = ['-format_whitelist', formats];
    try {
      // Dimensions first, for images too: a picture declaring too many pixels is refused before
      // ffmpeg allocates its frame. The first video stream's (an image's only stream).
      const probed = await run('ffprobe', [
        '-v', 'error', '-max_alloc', String(PROBE_ALLOC), ...only, '-select_streams', 'v:0',
        '-show_entries', 'stream=width,height:format=duration', '-of', 'default=noprint_wrappers=1', 'file:/dev/fd/3',
      ], fh.fd, f.name, signal);
      const info = new Map(probed.toString().split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1).trim()]));
      // Unknown (N/A, 0: dimensions ffprobe could not read) leaves the bound to ffmpeg's -max_alloc.
      const pixels = (Number(info.get('width')) || 0) * (Number(info.get('height')) || 0);
      if (pixels > MAX_PIXELS) throw tooLarge(f.name, `${info.get('width')}×${info.get('height')}`);
      const seek: string[] = [];
      if (source === 'video') {
        // Unknown (N/A: a stream without a duration): the first frame rather than a failure.
        const duration = Number.parseFloat(info.get('duration') ?? '') || 0;
        const p = this.s.videoPos;
        const at = 'share' in p ? duration * p.share : Math.min(p.seconds, duration);
        // noaccurate_seek: the key frame before `at`, so a position in the last frame still gives one.
        seek.push('-ss', at.toFixed(3), '-noaccurate_seek');
      }
      const png = await run('ffmpeg', [
        '-v', 'error', '-nostdin', '-max_alloc', String(MAX_ALLOC), ...only, ...seek, '-i', 'file:/dev/fd/3',
        '-frames:v', '1', '-vf', `scale=${WIDTH}:-1:flags=lanczos`, '-f', 'image2pipe', '-vcodec', 'png', 'pipe:1',
      ], fh.fd, f.name, signal);
      if (png.length === 0) throw new VfsError('INVALID', `cannot make a thumbnail of ${f.name}: ffmpeg found no picture in it`);
      return png;
    } finally {
      await fh.close();
    }
  }

  /**
   * Write the cache file whole or not at all: a hidden temp name (put-file's, which listings skip
   * and sweep when stale), flushed, then renamed. A failure costs the cache, not the request.
   */
  private async keep(path: string, png: Buffer): Promise<void> {
    const tmp = tempIn(nodePath.dirname(path));
    try {
      const fh = await open(tmp, 'wx');
      try {
        await fh.writeFile(png);
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(tmp, path);
    } catch (e) {
      await rm(tmp, { force: true }).catch(() => undefined);
      this.log.warn({ err: e, path }, 'cannot keep a thumbnail in thumb_cache_folder');
    }
  }
}

/** The answer for a picture over MAX_PIXELS, or one -max_alloc refused a frame of. */
function tooLarge(name: string, size?: string): VfsError {
  return new VfsError('INVALID', `cannot make a thumbnail of ${name}: picture too large${size ? ` (${size}, over ${MAX_PIXELS / 1e6} megapixels)` : ''}`);
}

/** The demuxers `ffmpeg -demuxers` lists; undefined when ffmpeg does not run. */
function demuxers(): Promise<string[] | undefined> {
  return new Promise((resolve) => {
    const c = spawn('ffmpeg', ['-hide_banner', '-demuxers'], { stdio: ['ignore', 'pipe', 'ignore'], timeout: RUN_TIMEOUT_MS });
    let text = '';
    c.stdout.setEncoding('utf8').on('data', (t: string) => (text += t));
    c.on('error', () => resolve(undefined));
    c.on('close', (code) => {
      if (code !== 0) return resolve(undefined);
      // After the legend's ` --` line, ` D  name  description` (` DE`, and ffmpeg 7's `d` column
      // for devices, elsewhere); a name may hold commas (`mov,mp4,m4a,...`), as the whitelist does.
      const lines = text.split('\n');
      const body = lines.slice(lines.findIndex((l) => /^\s*-+\s*$/.test(l)) + 1);
      resolve(body.flatMap((l) => /^\s*D[.E]?\s*d?\s+(\S+)/.exec(l)?.[1] ?? []));
    });
  });
}

/**
 * Run ffmpeg or ffprobe (argument array, no shell, stdin ignored) on the open file `fd`, given as
 * its fd 3, and collect what it writes up to MAX_THUMB_BYTES. Killed
 * on abort (the client went away), after RUN_TIMEOUT_MS and past the cap.
 */
function run(cmd: string, args: string[], fd: number, name: string, signal?: AbortSignal): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal));
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe', fd] });
    const out: Buffer[] = [];
    let size = 0;
    let errText = '';
    let failure: Error | undefined;
    const stop = (e: Error) => {
      failure ??= e;
      child.kill('SIGKILL');
    };
    const timer = setTimeout(() => stop(new VfsError('UPSTREAM', `${cmd} took over ${RUN_TIMEOUT_MS / 1000} s on ${name}`, { publicText: 'thumbnail timed out' })), RUN_TIMEOUT_MS);
    const onAbort = () => stop(abortError(signal));
    signal?.addEventListener('abort', onAbort, { once: true });
    // Both piped (stdio above), so present.
    child.stdout!.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_THUMB_BYTES) stop(new VfsError('INVALID', `cannot make a thumbnail of ${name}: over ${MAX_THUMB_BYTES >> 20} MiB`));
      else out.push(c);
    });
    child.stderr!.on('data', (c: Buffer) => {
      if (errText.length < 4 * ERR_TEXT) errText += c.toString('utf8');
    });
    let settled = false;
    const settle = (e?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (e) reject(e);
      else resolve(Buffer.concat(out));
    };
    child.on('error', (e: NodeJS.ErrnoException) => {
      settle(failure ?? (e.code === 'ENOENT'
        ? new VfsError('NOT_SUPPORTED', `thumbnails need ${cmd}, which is not installed on the server`)
        : new VfsError('UPSTREAM', `cannot run ${cmd}`, { cause: e })));
    });
    child.on('close', (code) => {
      if (failure) return settle(failure);
      // -max_alloc refused a frame: ffmpeg may even exit 0 then, having written nothing.
      if (ALLOC_FAILED.test(errText) && (code !== 0 || size === 0)) return settle(tooLarge(name));
      if (code === 0) return settle();
      // What the tool says is about /dev/fd/3 (never a host path): its last line names the problem.
      const why = errText.trim().split('\n').pop()?.replace(/^file:\/dev\/fd\/3: /, '').slice(0, ERR_TEXT) || `${cmd} exited with ${code}`;
      settle(new VfsError('INVALID', `cannot make a thumbnail of ${name}: ${why}`));
    });
  });
}
