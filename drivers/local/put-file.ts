/**
 * Writing an upload into place atomically: the bytes go to a temp file next to the target (same
 * file system, so the final rename is atomic) with a random name created with O_EXCL (so it can
 * never be a pre-planted symlink), then the temp file is renamed over the target. A failed or
 * aborted upload removes its temp file and leaves the target untouched. Small bodies go to an
 * unnamed file linked under the target's name instead where the system allows (unnamed-file.ts).
 *
 * Small bodies (the whole stream fits in SMALL_BODY) are buffered and written with synchronous
 * open, write, futimes, fstat, close and rename: page-cache work of a few microseconds each, while
 * their promise forms are a thread-pool round trip each — for a 1 KiB upload those round trips were
 * most of the time. The create is synchronous too: allocating an inode can wait on the file
 * system's journal (up to ~0.4 ms seen when another process writes a lot), but handing it to the
 * pool costs about as much on every upload — waking a pool thread, then the event loop again,
 * measured at 0.2-0.3 ms per PUT on a busy 2-CPU host — so the rare stall is the cheaper side.
 * Bigger bodies are streamed, so memory stays bounded whatever the size.
 */
import { closeSync, createWriteStream, fstatSync, futimesSync, linkSync, lstatSync, openSync, readlinkSync, renameSync, rmSync, statSync, unlinkSync, utimesSync, writeSync, type Stats, type WriteStream } from 'node:fs';
import { randomUUID } from 'node:crypto';
import * as nodePath from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { VfsError, fromErrno } from '../../src/errors.js';
import { WholeBody } from '../../src/whole-body.js';
import type { PutArgs } from '../types.js';
import { TEMP_PREFIX } from './listing.js';
import { nameUnnamed, openUnnamed } from './unnamed-file.js';

/** Bodies up to this size are buffered and written synchronously. */
export const SMALL_BODY = 64 * 1024;

// A random name, from randomUUID: it draws from a cached pool, where a randomBytes call per upload
// was a visible share of a small PUT's time.
export const tempIn = (dirReal: string) => nodePath.join(dirReal, TEMP_PREFIX + randomUUID());

/**
 * Read `stream` until it ends or holds more than `limit` bytes. In the second case the stream is left
 * paused with the bytes read put back (unshift), so it can be streamed on from its start. Read with
 * 'data' events, not an async iterator: the iterator's read() joins everything buffered into one new
 * buffer each time, a copy of the whole upload.
 */
function head(stream: Readable, limit: number): Promise<{ chunks: Buffer[]; size: number; done: boolean }> {
  return new Promise((resolve, reject) => {
    // Destroyed before we listen (a client gone while the VFS looked the target up): its 'close'
    // has been and gone, and nothing else will come.
    if (stream.destroyed) return reject(stream.errored ?? new Error('upload body closed before its end'));
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
    };
    const onData = (c: Buffer | Uint8Array) => {
      const b = Buffer.isBuffer(c) ? c : Buffer.from(c);
      chunks.push(b);
      size += b.length;
      if (size <= limit) return;
      stream.pause();
      stop();
      for (let i = chunks.length - 1; i >= 0; i--) stream.unshift(chunks[i]);
      resolve({ chunks, size, done: false });
    };
    const onEnd = () => (stop(), resolve({ chunks, size, done: true }));
    const onError = (e: unknown) => (stop(), reject(e));
    const onClose = () => (stop(), reject(new Error('upload body closed before its end')));
    stream.on('data', onData);
    stream.once('end', onEnd);
    stream.once('error', onError);
    stream.once('close', onClose);
  });
}

function checkSize(args: PutArgs, written: number): void {
  if (args.size !== undefined && written !== args.size) {
    throw new VfsError('INVALID', `size mismatch: expected ${args.size} bytes, got ${written}`);
  }
}

/**
 * The temp file becomes `target`: a rename, which replaces a file there, or with `noReplace` a hard
 * link, which fails with EEXIST when anything appeared under the name meanwhile (the check and the
 * placing are one step), then the temp name is dropped. Where the file system has no hard links
 * (FAT, some FUSE mounts) a look just before the rename is the best there is.
 */
export function place(temp: string, target: string, noReplace: boolean | undefined): void {
  if (!noReplace) return renameSync(temp, target);
  try {
    linkSync(temp, target);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'EMLINK') throw e;
    if (lstatSync(target, { throwIfNoEntry: false })) throw Object.assign(new Error('file exists'), { code: 'EEXIST' });
    return renameSync(temp, target);
  }
  unlinkSync(temp);
}

/** Write `data` to a new file and give it the name `target`; the file's stats. */
function writeSmall(dirReal: string, target: string, data: readonly Buffer[], args: PutArgs): Stats {
  const fd = openUnnamed(dirReal);
  if (fd === undefined) return writeSmallNamed(dirReal, target, data, args);
  try {
    for (const b of data) for (let off = 0; off < b.length; ) off += writeSync(fd, b, off);
    if (args.modified) futimesSync(fd, args.modified, args.modified);
    const st = fstatSync(fd);
    nameUnnamed(fd, target, args.noReplace, () => tempIn(dirReal));
    return st;
  } finally {
    closeSync(fd); // an unnamed file not linked is freed here
  }
}

/** writeSmall with a named temp file, renamed (or linked: place) to `target`. */
function writeSmallNamed(dirReal: string, target: string, data: readonly Buffer[], args: PutArgs): Stats {
  const temp = tempIn(dirReal);
  const fd = openSync(temp, 'wx');
  try {
    let st: Stats;
    try {
      for (const b of data) for (let off = 0; off < b.length; ) off += writeSync(fd, b, off);
      if (args.modified) futimesSync(fd, args.modified, args.modified);
      st = fstatSync(fd);
    } finally {
      closeSync(fd);
    }
    place(temp, target, args.noReplace);
    return st;
  } catch (e) {
    rmSync(temp, { force: true });
    throw e;
  }
}

/**
 * Hand each chunk to `release` once the write stream has written it (its write callback: the bytes
 * are in the file, and fs.WriteStream keeps no reference after it).
 */
function releaseWritten(file: WriteStream, release: (chunk: Buffer) => void): void {
  type Cb = (err?: Error | null) => void;
  const w = file as unknown as { _write(c: Buffer, e: BufferEncoding, cb: Cb): void; _writev(cs: Array<{ chunk: Buffer }>, cb: Cb): void };
  const write = w._write.bind(file);
  const writev = w._writev.bind(file);
  w._write = (chunk, enc, cb) =>
    write(chunk, enc, (err) => {
      if (!err) release(chunk);
      cb(err);
    });
  w._writev = (chunks, cb) =>
    writev(chunks, (err) => {
      if (!err) for (const c of chunks) release(c.chunk);
      cb(err);
    });
}

/**
 * A second descriptor of the temp file, only to find it: the folder may be renamed or moved during
 * the upload, taking the temp file along, and the name it was created under no longer reaches it.
 * Linux tells where an open file is now through /proc (undefined elsewhere, or if it cannot be read).
 */
function locator(temp: string): number | undefined {
  if (process.platform !== 'linux') return undefined;
  try {
    return openSync(temp, 'r');
  } catch {
    return undefined;
  }
}

/** Where the temp file is now: `created` unless /proc tells otherwise; undefined when it has no name left. */
function tempNow(fd: number | undefined, created: string): string | undefined {
  if (fd === undefined) return created;
  let now: string;
  try {
    now = readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return created;
  }
  if (now.endsWith(' (deleted)') || !nodePath.basename(now).startsWith(TEMP_PREFIX)) return undefined;
  return now;
}

/** Stream `body` into a temp file in `dirReal`, then rename it to `target`. */
async function writeStreamed(dirReal: string, target: string, body: Readable, args: PutArgs): Promise<Stats> {
  const temp = tempIn(dirReal);
  let written = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      written += chunk.length;
      args.onProgress?.(written);
      cb(null, chunk);
    },
  });
  // Created here, synchronously: the write stream owns (and closes) this descriptor, so no open of
  // its own can create the file after a failure has removed it.
  const file = createWriteStream(temp, { fd: openSync(temp, 'wx'), highWaterMark: 1 << 20 });
  const where = locator(temp);
  if (args.release) releaseWritten(file, args.release);
  try {
    await pipeline(body, counter, file, { signal: args.signal });
    checkSize(args, written);
    const now = tempNow(where, temp) ?? temp;
    // Synchronous, as the placing right after it: the temp file with the client's (old) time on it
    // is a stale leftover to a listing (listing.ts), which removed it in the turn between the two.
    if (args.modified) utimesSync(now, args.modified, args.modified);
    place(now, target, args.noReplace);
    return where === undefined ? statSync(target) : fstatSync(where);
  } catch (e) {
    // Removed wherever it is now (synchronous: nothing can come between the failure and it, not
    // even the process exiting); a write still under way goes to the unlinked file.
    const now = tempNow(where, temp);
    if (now) rmSync(now, { force: true });
    if (!file.closed) {
      file.destroy();
      await new Promise<void>((resolve) => file.once('close', () => resolve()));
    }
    throw e;
  } finally {
    if (where !== undefined) closeSync(where);
  }
}

/**
 * Put `stream` at `target` (a name directly inside the real folder `dirReal`). Errors are mapped to
 * VfsErrors for `dpath`; an aborted upload (args.signal) is UPSTREAM.
 */
export async function putFile(dirReal: string, target: string, stream: Readable, args: PutArgs, dpath: string): Promise<Stats> {
  try {
    if (args.size !== undefined && args.size > SMALL_BODY) return await writeStreamed(dirReal, target, stream, args);
    // A body already in memory whole (src/whole-body.ts) needs no reading.
    const first = stream instanceof WholeBody && stream.size <= SMALL_BODY ? { chunks: stream.chunks, size: stream.size, done: true } : await head(stream, SMALL_BODY);
    // Too big after all (size unknown in advance): the stream, its head put back, is streamed.
    if (!first.done) return await writeStreamed(dirReal, target, stream, args);
    args.signal?.throwIfAborted();
    if (first.size) args.onProgress?.(first.size);
    checkSize(args, first.size);
    return writeSmall(dirReal, target, first.chunks, args);
  } catch (e) {
    if (args.signal?.aborted) throw new VfsError('UPSTREAM', 'upload aborted', { path: dpath, cause: e });
    throw fromErrno(e, dpath);
  }
}
