/**
 * Turning any Link into bytes. WebDAV GET, SFTP READ and REST proxying all call `openLink`, so no
 * adapter branches on the link kind just to read a file.
 */
import { createReadStream } from 'node:fs';
import { pipeline, Readable, Transform } from 'node:stream';
import { VfsError } from '../errors.js';
import type { ByteRange, Link } from '../../drivers/types.js';
import { slice } from '../../drivers/util/streams.js';

/** Local reads use 1 MiB chunks: far fewer syscalls and event-loop turns than the 64 KiB default. */
export const FILE_HIGH_WATER_MARK = 1 << 20;
const MAX_REDIRECTS = 5;
/**
 * A URL link (an S3 presigned URL, a remote's direct link) whose server goes silent this long, for
 * its answer or between two chunks of the body, fails: fetch's own limit is 5 minutes of silence.
 * Mutable only so tests can shorten it; read when a fetch starts.
 */
export const LINK_TIMEOUTS = { idleMs: 60_000 };

/**
 * The inclusive byte span a range selects in a file of `size` bytes. A missing range is the whole
 * file (`end` is -1 for an empty file). A range starting at or past the end of a non-empty file is
 * unsatisfiable: VfsError('INVALID', 'range not satisfiable') (adapters answer 416 / EOF).
 */
export function clampRange(range: ByteRange | undefined, size: number): { start: number; end: number } {
  if (!range) return { start: 0, end: size - 1 };
  if (!Number.isInteger(range.start) || range.start < 0 || (range.end !== undefined && range.end < range.start)) {
    throw new VfsError('INVALID', 'range not satisfiable');
  }
  if (range.start >= size && !(size === 0 && range.start === 0)) throw new VfsError('INVALID', 'range not satisfiable');
  return { start: range.start, end: Math.min(range.end ?? size - 1, size - 1) };
}

/** A stream of a host file's bytes (all of them, or `range`). */
export function fileStream(path: string, range?: ByteRange, signal?: AbortSignal): Readable {
  if (range?.end !== undefined && range.end < range.start) return Readable.from([]);
  return createReadStream(path, { start: range?.start, end: range?.end, highWaterMark: FILE_HIGH_WATER_MARK, signal });
}

/**
 * A readable stream of the link's bytes, optionally limited to `range` (inclusive end).
 * `file` streams from disk, `range` calls the driver's opener, `url` fetches with a Range header,
 * following up to 5 redirects and dropping the link's own headers (its credentials) whenever a
 * redirect leaves the original origin; fetch itself never adds cookies or auth.
 */
export async function openLink(link: Link, range?: ByteRange, signal?: AbortSignal): Promise<Readable> {
  switch (link.kind) {
    case 'file':
      return fileStream(link.path, range, signal);
    case 'range':
      return link.open(range, signal);
    case 'url':
      return fetchRange(link.url, link.headers ?? {}, range, signal);
  }
}

async function fetchRange(url: string, headers: Record<string, string>, range: ByteRange | undefined, signal?: AbortSignal): Promise<Readable> {
  let watched: Transform | undefined;
  // Quiet because our reader holds the bytes back (a paused video player), not the server: wait on.
  const held = () => !!watched && (watched.readableLength > 0 || watched.writableNeedDrain);
  const idle = new IdleTimer(LINK_TIMEOUTS.idleMs, held);
  try {
    const body = await fetchFollowing(url, headers, range, signal ? AbortSignal.any([signal, idle.signal]) : idle.signal);
    // Every chunk restarts the timer; silence aborts the fetch, which fails the body.
    watched = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        idle.restart();
        cb(null, chunk);
      },
    });
    pipeline(body, watched, () => idle.stop());
    return watched;
  } catch (e) {
    idle.stop();
    throw idle.signal.aborted ? new VfsError('UPSTREAM', 'link download went silent', { cause: e }) : e;
  }
}

/** Aborts its signal after `ms` without a restart. */
class IdleTimer {
  private readonly ac = new AbortController();
  private readonly timer: NodeJS.Timeout;

  /** `held`: true while the silence is the reader's doing; the timer then starts over. */
  constructor(ms: number, held: () => boolean = () => false) {
    this.timer = setTimeout(() => {
      if (held()) return void this.timer.refresh();
      this.ac.abort(new VfsError('UPSTREAM', 'link download went silent'));
    }, ms).unref();
  }

  get signal(): AbortSignal {
    return this.ac.signal;
  }

  restart(): void {
    this.timer.refresh();
  }

  stop(): void {
    clearTimeout(this.timer);
  }
}

async function fetchFollowing(url: string, headers: Record<string, string>, range: ByteRange | undefined, signal: AbortSignal): Promise<Readable> {
  const origin = new URL(url).origin;
  let current = url;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const sameOrigin = new URL(current).origin === origin;
    // The link's headers were made for its own origin (tokens, cookies): none of them go elsewhere.
    const h: Record<string, string> = sameOrigin ? { ...headers } : {};
    if (range) h['Range'] = `bytes=${range.start}-${range.end ?? ''}`;
    let res: Response;
    try {
      res = await fetch(current, { headers: h, redirect: 'manual', signal });
    } catch (e) {
      throw new VfsError('UPSTREAM', 'failed to fetch link', { cause: e });
    }
    if (res.status >= 300 && res.status < 400 && res.headers.get('location')) {
      await res.body?.cancel();
      current = new URL(res.headers.get('location')!, current).toString();
      continue;
    }
    if (res.status >= 400) {
      await res.body?.cancel();
      throw new VfsError('UPSTREAM', `http status code ${res.status}`);
    }
    const body = res.body ? Readable.fromWeb(res.body as import('node:stream/web').ReadableStream) : Readable.from([]);
    // A server that ignores Range answers 200 with the whole file: cut the span out ourselves.
    if (!range || res.status === 206) return body;
    // Stops reading once the span is out: a range of a huge file pulled it all to the end.
    return slice(body, 0, range.start, range.end);
  }
  throw new VfsError('UPSTREAM', 'too many redirects');
}

