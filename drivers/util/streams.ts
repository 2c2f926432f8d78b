/**
 * Stream helpers shared by the network drivers: counting (progress + the announced-size check that
 * makes a short or long upload fail instead of storing a truncated file), and tying a stream's
 * life to an AbortSignal.
 */
import { Readable, Transform } from 'node:stream';
import { VfsError } from '../../src/errors.js';
import { validateName } from '../../src/paths.js';

export interface Counter extends Transform {
  readonly bytes: number;
}

/** Pass bytes through, report progress, and fail at the end if the count differs from `expected`. */
export function counter(expected: number | undefined, onProgress?: (n: number) => void): Counter {
  let bytes = 0;
  const t = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      bytes += chunk.length;
      if (expected !== undefined && bytes > expected) return cb(sizeMismatch(expected, bytes));
      onProgress?.(bytes);
      cb(null, chunk);
    },
    flush(cb) {
      cb(expected !== undefined && bytes !== expected ? sizeMismatch(expected, bytes) : null);
    },
  });
  Object.defineProperty(t, 'bytes', { get: () => bytes });
  return t as Counter;
}

function sizeMismatch(expected: number, got: number): VfsError {
  return new VfsError('INVALID', `size mismatch: expected ${expected} bytes, got ${got}`);
}

export function abortError(signal?: AbortSignal): VfsError {
  return new VfsError('UPSTREAM', 'operation aborted', { cause: signal?.reason });
}

/**
 * Destroy `stream` with an UPSTREAM error when `signal` aborts; returns the unsubscribe function.
 * Unsubscribed by itself when the stream closes: a signal can outlive many streams (an SFTP channel's
 * serves every download of the session), and each listener would keep its stream alive.
 */
export function destroyOnAbort(stream: Readable | Transform, signal?: AbortSignal): () => void {
  if (!signal) return () => undefined;
  const onAbort = () => stream.destroy(abortError(signal));
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  const off = () => signal.removeEventListener('abort', onAbort);
  stream.once('close', off);
  return off;
}

/**
 * Bytes [start, end] (inclusive) of `src`, a stream that begins at byte `offset`. `src` is destroyed
 * once `end` is passed (and when the result is): a Transform kept reading the rest of a whole file
 * only to drop it, so a range of a few bytes pulled every byte of the file from the server.
 */
export function slice(src: Readable, offset: number, start: number, end?: number): Readable {
  async function* cut(): AsyncGenerator<Buffer> {
    let pos = offset;
    for await (const chunk of src as AsyncIterable<Buffer>) {
      const from = Math.max(0, start - pos);
      const to = end === undefined ? chunk.length : Math.min(chunk.length, end + 1 - pos);
      pos += chunk.length;
      if (to > from) yield chunk.subarray(from, to);
      if (end !== undefined && pos > end) return; // leaving the loop destroys `src`
    }
  }
  const out = Readable.from(cut(), { objectMode: false });
  // A generator waiting for a chunk of a stalled `src` only ends when that chunk comes: a reader
  // that goes away must let go of the source at once.
  out.once('close', () => src.destroy());
  return out;
}

/**
 * All of `src` in one buffer, at most `limit` bytes: past that `src` is destroyed and the read fails
 * with UPSTREAM `${what} too large` (what a backend answers is read whole only where it is small by
 * nature, and a hostile or broken one could send without end).
 */
export async function bufferAtMost(src: Readable, limit: number, what: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  let n = 0;
  for await (const c of src as AsyncIterable<Buffer>) {
    n += c.length;
    if (n > limit) {
      src.destroy();
      throw new VfsError('UPSTREAM', `${what} too large`);
    }
    parts.push(c);
  }
  return Buffer.concat(parts, n);
}

/** The longest prefix of `s` that is at most `max` bytes in UTF-8, never splitting a character. */
export function utf8Prefix(s: string, max: number): string {
  let bytes = 0;
  let units = 0;
  for (const ch of s) { // whole code points: a surrogate pair is never split
    bytes += Buffer.byteLength(ch);
    if (bytes > max) break;
    units += ch.length;
  }
  return s.slice(0, units);
}

/**
 * A hidden temporary name for an upload of `name`, with a short random suffix: the name is cut to
 * 100 UTF-8 bytes (not characters), so the whole temp name stays well within the usual 255-byte
 * limit for a file name, whatever script the name is in.
 */
export function tempName(name: string): string {
  return `.${utf8Prefix(name, 100)}.tg-${Math.random().toString(36).slice(2, 10)}.tmp`;
}

const TEMP_NAME = /^\..*\.tg-[0-9a-z]{1,8}\.tmp$/s;

/**
 * A name tempName made: listings leave it out, as Local leaves out its own upload temp files. It
 * exists while an upload runs, or stays behind one whose remote went away before its cleanup.
 */
export function isTempName(name: string): boolean {
  return TEMP_NAME.test(name);
}

/**
 * A valid name a driver may create: one of tempName's form is left out of listings, so an entry
 * made under it was reported created and never shown (the Local driver refuses its own likewise).
 */
export function creatableName(name: string): string {
  if (isTempName(validateName(name))) throw new VfsError('INVALID', `${name} is a reserved name`);
  return name;
}
